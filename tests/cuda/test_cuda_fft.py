"""ember.fft on 'cuda' (cuFFT through CuPy): values, dtypes and gradients equal the CPU's
(itself tested against NumPy and PyTorch in tests/test_fft.py), results and gradients on
the arrays' device.  Skipped, never faked, without a GPU; CI runs it on the emulation
(tests/cuda_emu: NumPy's fft held to cupy.fft's signatures), also on cuda:1."""
import numpy as np
import pytest

import ember
from cuda_helpers import GPU_MARK, DEV, assert_on_device, assert_same, gpu, layout_pairs
from helpers import rnd

pytestmark = GPU_MARK


CASES = [
    ("fft", dict(), "complex64"),
    ("fft", dict(n=5, axis=0, norm="ortho"), "float32"),
    ("ifft", dict(n=12, norm="forward"), "complex128"),
    ("rfft", dict(n=9), "float32"),
    ("irfft", dict(), "complex64"),
    ("irfft", dict(n=7, axis=0, norm="ortho"), "complex128"),
    ("hfft", dict(n=6), "complex128"),
    ("ihfft", dict(norm="forward"), "float64"),
    ("fftn", dict(s=(3, 10)), "complex64"),
    ("fftn", dict(axes=(1, 1)), "complex128"),              # repeated axis
    ("ifft2", dict(norm="ortho"), "complex64"),
    ("rfftn", dict(axes=(1, 0)), "float32"),
    ("rfft2", dict(s=(5, 6)), "float64"),
    ("irfftn", dict(s=(4, 9)), "complex64"),
    ("irfft2", dict(norm="forward"), "complex128"),
    ("hfftn", dict(), "complex128"),
    ("ihfft2", dict(), "float32"),
]


@pytest.mark.parametrize("case", range(len(CASES)), ids=lambda i: CASES[i][0] + str(i))
def test_values_match_cpu(case):
    name, kw, dtype = CASES[case]
    base = rnd(6, 8, dtype=dtype, seed=case)
    for label, xc, xg in layout_pairs(base):
        f = getattr(ember.fft, name)
        assert_same(f(xg, **kw), f(xc, **kw))


@pytest.mark.parametrize("dtype", ["int32", "float16", "bool"])
def test_dtypes_match_cpu(dtype):
    a = (np.arange(12).reshape(3, 4) % 3).astype(dtype)
    for name in ("fft", "rfftn", "ihfft"):
        f = getattr(ember.fft, name)
        got, exp = f(gpu(a)), f(ember.asarray(a))
        assert got.dtype == exp.dtype
        assert_same(got, exp)


def test_out_on_device():
    a = rnd(4, 6, dtype="complex64")
    out = gpu(np.zeros((4, 6), np.complex64))
    res = ember.fft.fft(gpu(a), out=out)
    assert res is out
    assert_same(out, ember.fft.fft(ember.asarray(a)))
    if DEV != "cpu":
        with pytest.raises(RuntimeError, match="out is on"):
            ember.fft.fft(gpu(a), out=ember.zeros((4, 6), dtype=ember.complex64))


def test_freqs_and_shifts_on_device():
    f = ember.fft.fftfreq(7, 0.5, device=DEV)
    assert_same(f, ember.fft.fftfreq(7, 0.5))
    assert_same(ember.fft.rfftfreq(8, dtype=ember.float64, device=DEV),
                ember.fft.rfftfreq(8, dtype=ember.float64))
    a = rnd(4, 5, dtype="float32")
    assert_same(ember.fft.fftshift(gpu(a)), ember.fft.fftshift(ember.asarray(a)))
    assert_same(ember.fft.ifftshift(gpu(a), axes=0), ember.fft.ifftshift(ember.asarray(a), axes=0))


GRAD_CASES = [
    ("fft", dict(n=5), False), ("fft", dict(n=10, norm="ortho"), True),
    ("ifft", dict(axis=0), True), ("rfft", dict(n=11, norm="forward"), False),
    ("irfft", dict(n=9), True), ("irfft", dict(n=4, norm="ortho"), True),
    ("hfft", dict(), True), ("ihfft", dict(n=6), False),
    ("fftn", dict(s=(3, 9)), True), ("rfftn", dict(), False),
    ("irfftn", dict(s=(5, 6), norm="forward"), True), ("hfft2", dict(), True),
]


@pytest.mark.parametrize("case", range(len(GRAD_CASES)), ids=lambda i: GRAD_CASES[i][0] + str(i))
def test_gradients_match_cpu(case):
    name, kw, cplx = GRAD_CASES[case]
    a = rnd(4, 6, dtype="complex128" if cplx else "float64", seed=case)
    grads, outs = [], []
    for dev in ("cpu", DEV):
        x = ember.asarray(a.copy()) if dev == "cpu" else gpu(a)
        x.requires_grad = True
        y = getattr(ember.fft, name)(x, **kw)
        w = rnd(*y.shape, dtype="float64", seed=100)
        wd = ember.asarray(w) if dev == "cpu" else gpu(w)
        # quadratic, so that the gradient depends on x and has a gradient itself
        loss = ((ember.real(y) ** 2 * wd + ember.imag(y) * wd * 0.5).sum()
                if y.dtype.kind == "c" else (y * y * wd).sum())
        (g,) = ember.autograd.grad(loss, x, create_graph=True)
        (gg,) = ember.autograd.grad((ember.abs(g) ** 2).sum(), x)   # double backward
        outs.append(y)
        grads.append((g, gg))
    assert_same(outs[1], outs[0])
    for got, exp in zip(grads[1], grads[0]):
        assert_on_device(got)
        assert_same(got, exp)


@pytest.mark.skipif(DEV == "cpu", reason="dry run on the CPU")
def test_cufft_primitives_are_registered_and_used(monkeypatch):
    from ember.cuda import _dispatch
    x = gpu(rnd(3, 8, dtype="float32"))             # (the GPU backend loads its ops)
    ember.fft.fft(x)
    calls = []
    for name in ("fft._c2c", "fft._r2c", "fft._c2r"):
        impl = _dispatch._IMPLS[name]           # ember/cuda/ops_fft.py registered them
        monkeypatch.setitem(_dispatch._IMPLS, name,
                            lambda *a, _impl=impl, _n=name: (calls.append(_n), _impl(*a))[1])
    ember.fft.irfft(ember.fft.rfft(x)) + ember.fft.fft(x).real
    assert sorted(calls) == ["fft._c2c", "fft._c2r", "fft._r2c"]


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "fftn", "rfftn", "irfftn"])
def test_empty_batch(name):
    dtype = "float32" if name.startswith("r") else "complex64"
    a = np.zeros((0, 4), dtype)
    f = getattr(ember.fft, name)
    kw = dict(axes=(1,)) if name.endswith("n") else {}
    assert_same(f(gpu(a), **kw), f(ember.asarray(a), **kw))
