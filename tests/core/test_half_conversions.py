"""The 16-bit float conversions of the generated CPU loops, bit for bit.

float16 and bfloat16 arrays compute in float32: every loop widens its inputs
and narrows its result (branch-free code, so the loops vectorise).  Widening is
checked on all 65,536 bit patterns; narrowing on 4 million random float32 bit
patterns plus, for every exponent, the exact ties and their neighbours, against
NumPy's float16 cast and ml_dtypes' bfloat16 cast (round to nearest even).
"""
import ml_dtypes
import numpy as np
import pytest

import ember

WIDE = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
DROPPED = {"float16": 13, "bfloat16": 16}      # mantissa bits a narrowing drops


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_widening_every_bit_pattern(name):
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(WIDE[name])
    got = np.asarray(ember.asarray(h).astype(ember.float32))
    want = h.astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])
    assert np.isnan(got[nan]).all()


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_narrowing_rounds_to_nearest_even(name):
    rng = np.random.default_rng(0)
    step = 2 ** DROPPED[name]
    base = np.arange(0, 2 ** 32, step, dtype=np.uint64)
    tie = step // 2
    bits = np.concatenate([rng.integers(0, 2 ** 32, 4_000_000, dtype=np.uint64), base,
                           base + tie, base + tie - 1, base + tie + 1]).astype(np.uint32)
    f = bits.view(np.float32)
    got = np.asarray(ember.asarray(f).astype(getattr(ember, name))).view(np.uint16)
    with np.errstate(all="ignore"):
        want = f.astype(WIDE[name]).view(np.uint16)
    nan = np.isnan(f)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    assert np.isnan(got[nan].view(WIDE[name]).astype(np.float32)).all()


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_arithmetic_rounds_once_from_float32(name):
    """a + b and a * 0.5 in 16 bits equal the float32 result rounded once."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal(10_001).astype(WIDE[name])
    b = rng.standard_normal(10_001).astype(WIDE[name])
    ea, eb = ember.asarray(a), ember.asarray(b)
    want = (a.astype(np.float32) + b.astype(np.float32)).astype(WIDE[name])
    np.testing.assert_array_equal(np.asarray(ea + eb).view(np.uint16), want.view(np.uint16))
    want = (a.astype(np.float32) * np.float32(0.5)).astype(WIDE[name])
    np.testing.assert_array_equal(np.asarray(ea * 0.5).view(np.uint16), want.view(np.uint16))



@pytest.mark.parametrize("layout", ["contiguous", "scalar", "strided", "block_tail"])
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide", "fmin", "fmax",
                                "minimum", "maximum", "copysign", "negative", "absolute",
                                "sqrt", "square"])
def test_float16_ops_on_every_bit_pattern_match_numpy(op, layout):
    """The float16 op loops convert a block at a time (F16C in the AVX2 build): every
    bit pattern (signalling NaNs, subnormals, both zeros, the largest values), against
    NumPy's float16 op; NaN as NaN (ember narrows every NaN to one quiet NaN)."""
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    a = bits.view(np.float16)
    b = bits[::-1].copy().view(np.float16)
    fn = getattr(np, op)
    pick = {"contiguous": lambda x: x, "strided": lambda x: x[::3],
            "block_tail": lambda x: x[5:5 + 256 * 3 + 13]}
    with np.errstate(all="ignore"):
        if fn.nin == 1:
            x = pick.get(layout, lambda x: x)(a)
            want, got = fn(x), getattr(ember, op)(ember.asarray(x))
        elif layout == "scalar":
            want = fn(a, b[777])
            got = getattr(ember, op)(ember.asarray(a), ember.asarray(b)[777])
        else:
            x, y = pick[layout](a), pick[layout](b)
            want, got = fn(x, y), getattr(ember, op)(ember.asarray(x), ember.asarray(y))
    got = np.asarray(got)
    assert got.dtype == want.dtype == np.float16
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
