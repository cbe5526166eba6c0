"""float32 Adam's sqrt(v) / sqrt(bias_correction2) without a division (optim_simd.h's
emb_cdiv_f32: s * RN(1/c) and two Markstein corrections) gives the bits of the
division, for every float32 significand of s: the quotient's significand depends only
on the significands of s and c (no overflow or underflow in the kernel's range of c), so
one binade of s per c is every case for that c."""
import numpy as np
import pytest

from ember._kernels.cpu import optim as ok


@pytest.fixture(params=[1, 2], ids=["avx2-fma", "avx512"])
def variant(request):
    name = ok._select_kernels(request.param)
    if name == "portable":
        pytest.skip("no FMA on this CPU: the kernels divide")
    yield name
    ok._select_kernels(2)


def _all_significands():
    return (np.arange(1 << 23, dtype=np.uint32) | np.uint32(127 << 23)).view(np.float32)


def _bias_correction_sqrts(beta2, steps):
    t = np.arange(1, steps + 1, dtype=np.float64)
    return np.sqrt(1.0 - beta2 ** t).astype(np.float32)     # as the optimizer rounds it


def test_cdiv_equals_division_for_every_significand(variant):
    s = _all_significands()
    out = np.empty_like(s)
    rng = np.random.default_rng(25)
    # a sample of the c of the first 20,000 steps at beta2 = 0.999 (benchmarks/README.md:
    # all of them, checked offline), the first of beta2 = 0.99, the ends, random ones
    cs = list(np.unique(_bias_correction_sqrts(0.999, 20000))[::800])
    cs += list(_bias_correction_sqrts(0.99, 8)) + [np.float32(1.0), np.float32(2.0 ** -30)]
    cs += list(rng.uniform(2.0 ** -30, 1.0, 6).astype(np.float32))
    for c in cs:
        c = np.float32(c)
        ok._cdiv_f32(s, c, out)
        bad = np.flatnonzero(out != s / c)
        assert bad.size == 0, (variant, float(c), s[bad[:3]], out[bad[:3]], (s / c)[bad[:3]])


def test_cdiv_special_values(variant):
    """The values s = sqrt(v) takes at the ends: zeros, inf, NaN, sqrt of the smallest
    subnormal and of the largest float32 (beyond these the kernel is not used)."""
    s = np.array([0.0, -0.0, np.inf, np.nan, np.sqrt(np.float32(1e-45)), 1e-20,
                  np.sqrt(np.finfo(np.float32).max)], np.float32)
    out = np.empty_like(s)
    for c in (np.float32(0.0316), np.float32(2.0 ** -30), np.float32(1.0)):
        ok._cdiv_f32(s, c, out)
        np.testing.assert_array_equal(out, s / c)
        assert np.signbit(out[1])
