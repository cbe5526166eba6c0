"""The Array API fixes of issue 23 on the GPU, against the host's results and NumPy:
sorted unique_* (CuPy's, not NumPy 2.3+'s unsorted ones), floor_divide with an
infinite operand, complex expm1's special values, vecdot's dtype, NumPy's keyword
names.  Skipped without a GPU (the emulation runs them in CI)."""
import numpy as np
import pytest

import ember
from cuda_helpers import GPU_MARK, assert_on_device, gpu, host
from test_array_api_fixes import (EXPM1_SPECIAL, UNIQUE_INPUTS, _floordiv_oracle, _np_unique,
                                  _same_complex)

pytestmark = GPU_MARK


@pytest.mark.parametrize("name", list(UNIQUE_INPUTS))
def test_unique_functions_sorted_on_gpu(name):
    a = UNIQUE_INPUTS[name]
    values, index, inverse, counts = _np_unique(a)
    x = gpu(a)
    got = ember.unique_all(x)
    for part in got:
        assert_on_device(part)
    np.testing.assert_array_equal(host(got.values), values)
    np.testing.assert_array_equal(host(got.indices), index)
    np.testing.assert_array_equal(host(got.inverse_indices), inverse.reshape(a.shape))
    np.testing.assert_array_equal(host(got.counts), counts)
    assert got.indices.dtype == np.int64 and got.counts.dtype == np.int64
    np.testing.assert_array_equal(host(ember.unique_values(x)), values)
    c = ember.unique_counts(x)
    np.testing.assert_array_equal(host(c.counts), counts)
    i = ember.unique_inverse(x=x)
    np.testing.assert_array_equal(host(i.inverse_indices), inverse.reshape(a.shape))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_floor_divide_infinite_operand_on_gpu(dtype):
    vals = np.array([np.inf, -np.inf, 7.0, -7.0, 0.0, -0.0, np.nan], dtype)
    a, b = np.meshgrid(vals, vals, indexing="ij")
    expected = _floordiv_oracle(a, b).astype(dtype)
    with np.errstate(all="ignore"):
        got = host(gpu(a) // gpu(b))
        scal = host(gpu(a) // np.inf)
        x = gpu(a)
        x //= gpu(b)
    num = ~np.isnan(expected)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got)[num], np.signbit(expected)[num])
    np.testing.assert_array_equal(scal, _floordiv_oracle(a, np.asarray(np.inf, dtype)))
    np.testing.assert_array_equal(host(x), expected)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_expm1_complex_on_gpu(dtype):
    z = np.array([c for c, _ in EXPM1_SPECIAL], dtype)
    with np.errstate(all="ignore"):
        got = host(ember.expm1(gpu(z)))
    assert got.dtype == dtype
    _same_complex(got.tolist(), [e for _, e in EXPM1_SPECIAL])
    w = (np.random.default_rng(0).uniform(-3, 3, 20)
         + 1j * np.random.default_rng(1).uniform(-3, 3, 20)).astype(dtype)
    np.testing.assert_allclose(host(ember.expm1(gpu(w))), host(ember.expm1(ember.asarray(w))),
                               rtol=2e-6 if dtype == "complex64" else 1e-13)


def test_vecdot_dtype_and_keywords_on_gpu():
    a = np.full((2, 5), 200, np.uint8)
    got = ember.vecdot(gpu(a), gpu(a))
    assert_on_device(got)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(host(got), np.vecdot(a, a))
    base = np.arange(12.0).reshape(3, 4)
    idx = np.array([[3], [0], [1]])
    expected = base.copy()
    np.put_along_axis(expected, idx, values=-1.0, axis=-1)
    x = gpu(base)
    ember.put_along_axis(x, gpu(idx), values=-1.0, axis=-1)
    np.testing.assert_array_equal(host(x), expected)
    np.testing.assert_array_equal(host(ember.take_along_axis(x, indices=gpu(idx), axis=1)),
                                  np.take_along_axis(expected, idx, axis=1))
