"""Calls NumPy refuses are refused by ember too, with the same exception type (#24:
no silent successes).  Each case is run on NumPy (the oracle must raise) and on ember.
Found by the fuzzer's NumPy twin (python -m tests.fuzz --json F: "lenient_calls")."""
import numpy as np
import pytest

import ember


def _arrays(xp):
    return {"f": xp.asarray([3.0, 1.0, 2.0]), "i": xp.asarray([1, 2, 3], dtype="int32"),
            "u": xp.asarray([1, 2], dtype="uint32"), "m": xp.ones((4, 4)),
            "s": xp.asarray(1.5), "b": xp.zeros((2, 3), dtype=bool)}


CASES = {
    # ufunc methods take their operands positionally, as NumPy's
    "at_keyword_b": (lambda xp, a: xp.add.at(a["f"], [0], b=1.0), TypeError),
    "at_unary_with_operand": (lambda xp, a: xp.negative.at(a["f"], [0], a["f"]), ValueError),
    "outer_keyword_b": (lambda xp, a: xp.multiply.outer(a["f"], b=a["f"]), TypeError),
    "reduce_out_wrong_ndim": (lambda xp, a: xp.maximum.reduce(a["m"], out=xp.ones((1, 4))),
                              ValueError),
    # dtype= selects a loop: NumPy's type resolution decides
    "tanh_integer_dtype": (lambda xp, a: xp.tanh(a["i"], dtype=int), TypeError),
    "greater_float_dtype": (lambda xp, a: xp.greater(a["i"], a["i"], dtype=float), TypeError),
    "maximum_bool_dtype": (lambda xp, a: xp.maximum(a["f"], a["f"], dtype="bool"), TypeError),
    # an array is not a dtype
    "zeros_dtype_array": (lambda xp, a: xp.zeros(2, dtype=a["f"]), TypeError),
    "astype_array": (lambda xp, a: a["f"].astype(a["i"]), TypeError),
    # keepdims=None, order='Z', sort's kind and order
    "sum_keepdims_none": (lambda xp, a: xp.sum(a["f"], keepdims=None), TypeError),
    "all_keepdims_none": (lambda xp, a: xp.all(a["f"], keepdims=None), TypeError),
    "ones_like_order": (lambda xp, a: xp.ones_like(a["f"], order="Z"), ValueError),
    "copy_order": (lambda xp, a: xp.copy(a["f"], order="Z"), ValueError),
    "ones_like_order_array": (lambda xp, a: xp.ones_like(a["f"], "int8", a["f"]), TypeError),
    "sort_kind": (lambda xp, a: a["f"].sort(kind="x"), ValueError),
    "sort_kind_int": (lambda xp, a: a["f"].sort(0, -1), TypeError),
    "argsort_kind": (lambda xp, a: a["f"].argsort(kind="x"), ValueError),
    "sort_order": (lambda xp, a: a["f"].sort(order="F"), ValueError),
    "sort_0d": (lambda xp, a: a["s"].sort(), np.exceptions.AxisError),
    # out= casts under 'same_kind' and has the result's shape
    "conj_out_bool": (lambda xp, a: xp.conj(xp.ones(3, dtype="float64"),
                                            out=xp.zeros(3, dtype=bool)), TypeError),
    "conj_out_shape": (lambda xp, a: xp.conj(xp.ones(2, dtype="float64"),
                                             out=xp.zeros((2, 3))), ValueError),
    # scalar-only arguments
    "fill_with_empty": (lambda xp, a: a["f"].fill(xp.zeros((3, 0))), ValueError),
    "fill_with_vector": (lambda xp, a: a["f"].fill(xp.asarray([1.0])), ValueError),
    "fill_with_list": (lambda xp, a: a["f"].fill([1.0]), ValueError),
    "round_decimals_array": (lambda xp, a: xp.round(a["f"], a["f"]), TypeError),
    "diagonal_huge_offset": (lambda xp, a: a["m"].diagonal(offset=10**12), OverflowError),
    "clip_a_min_with_max": (lambda xp, a: xp.clip(a["f"], a_min=0.0, max=1.0), (TypeError,
                                                                                 ValueError)),
    # NumPy's parameter names (positional-only where NumPy's are)
    "ascontiguousarray_x": (lambda xp, a: xp.ascontiguousarray(x=a["f"]), TypeError),
    "copy_x": (lambda xp, a: xp.copy(x=a["f"]), TypeError),
    "extract_x": (lambda xp, a: xp.extract(a["b"], x=a["b"]), TypeError),
    "setdiff1d_b": (lambda xp, a: xp.setdiff1d(a["f"], b=a["f"]), TypeError),
    "array_obj": (lambda xp, a: xp.array(obj=a["f"]), TypeError),
    # dtype functions take dtypes (arrays only where NumPy takes them)
    "promote_types_array": (lambda xp, a: xp.promote_types(a["f"], a["i"]), TypeError),
    "promote_types_none": (lambda xp, a: xp.promote_types(None, "int8"), TypeError),
    "can_cast_to_none": (lambda xp, a: xp.can_cast(a["f"], None), TypeError),
    "issubdtype_array": (lambda xp, a: xp.issubdtype(a["f"], xp.floating), TypeError),
    "isdtype_python_type": (lambda xp, a: xp.isdtype(complex, "numeric"), TypeError),
    "accumulate_dtype_array": (lambda xp, a: xp.add.accumulate(a["f"], dtype=a["f"]), TypeError),
    # method signatures
    "reshape_no_shape": (lambda xp, a: a["f"].reshape(), TypeError),
    "view_dtype_twice": (lambda xp, a: a["f"].view("float32", dtype="float32"), TypeError),
    "to_device_none": (lambda xp, a: a["f"].to_device(None), TypeError),
    "to_device_cpu_stream": (lambda xp, a: a["f"].to_device("cpu", stream=1), ValueError),
    "array_copy_positional": (lambda xp, a: a["f"].__array__(None, True), TypeError),
    "dlpack_max_version": (lambda xp, a: a["f"].__dlpack__(max_version=a["f"]), TypeError),
    "method_copy_order": (lambda xp, a: a["f"].copy(order="Z"), ValueError),
    "astype_order_array": (lambda xp, a: a["f"].astype(float, a["f"]), TypeError),
    "astype_casting_safe": (lambda xp, a: a["f"].astype("int8", casting="safe"), TypeError),
    "flatten_second_array": (lambda xp, a: a["f"].flatten("C", a["f"]), TypeError),
    "out_twice": (lambda xp, a: xp.sqrt(a["f"], a["f"], out=None), TypeError),
    # arguments NumPy checks
    "linalg_outer_2d": (lambda xp, a: xp.linalg.outer(a["m"], a["f"]), ValueError),
    "svd_hermitian_rectangular": (lambda xp, a: xp.linalg.svd(xp.ones((2, 3)), hermitian=True),
                                  np.linalg.LinAlgError),
    "tril_indices_array": (lambda xp, a: xp.tril_indices(xp.asarray([2.0])), TypeError),
    "roll_2d_shift": (lambda xp, a: xp.roll(a["f"], xp.zeros((2, 2), dtype="int64")),
                      ValueError),
    "vstack_0d": (lambda xp, a: xp.vstack(a["s"]), TypeError),
    "trim_zeros_trim_array": (lambda xp, a: xp.trim_zeros(a["f"], trim=a["f"]),
                              (TypeError, AttributeError)),
    "ones_like_subok_array": (lambda xp, a: xp.ones_like(a["f"], subok=a["m"]),
                              (TypeError, ValueError)),
    "astype_function_list": (lambda xp, a: xp.astype([1, 2], float), TypeError),
    "var_dtype_array": (lambda xp, a: xp.var(a["m"], (0, 1), a["f"]), TypeError),
    "trim_zeros_empty_trim_array": (lambda xp, a: xp.trim_zeros(xp.zeros(0), trim=a["f"]),
                                    (TypeError, AttributeError)),
    "astype_subok_str": (lambda xp, a: a["f"].astype(complex, None, subok="float32"), TypeError),
    "keepdims_too_large": (lambda xp, a: a["m"].all(None, None, 2**31), (TypeError, OverflowError)),
    "list_with_none": (lambda xp, a: xp.power.reduce([1.5, None]), TypeError),
    "ones_bool_shape": (lambda xp, a: xp.ones(True), TypeError),
    "zeros_bool_in_shape": (lambda xp, a: xp.zeros((2, True)), TypeError),
    "mean_dtype_array": (lambda xp, a: a["m"].mean(None, a["f"]), TypeError),
    "reshape_order_k": (lambda xp, a: xp.reshape(a["f"], (3,), order="K"), ValueError),
    "union1d_keywords": (lambda xp, a: xp.union1d(a=a["f"], b=a["f"]), TypeError),
    "random_bytes_array": (lambda xp, a: xp.random.bytes(a["f"]), TypeError),
    "ascontiguousarray_overflow": (lambda xp, a: xp.ascontiguousarray(10**12, dtype="int8"),
                                   OverflowError),
    "resize_array_shape": (lambda xp, a: xp.resize(a["f"], a["f"]), TypeError),
    "empty_like_subok_function": (lambda xp, a: xp.empty_like(a["f"], subok=lambda: 0),
                                  TypeError),
    "fft_n_minus_one": (lambda xp, a: xp.fft.fft(a["f"], n=-1), ValueError),
    "fabs_complex": (lambda xp, a: xp.fabs(xp.asarray([1 + 1j])), TypeError),
    "fabs_int_into_int_out": (lambda xp, a: xp.fabs(a["u"], out=xp.zeros(2, dtype="uint32")),
                              TypeError),
    "ihfft_axis_none": (lambda xp, a: xp.fft.ihfft(a["f"], axis=None), TypeError),
    "intersect1d_keyword_b": (lambda xp, a: xp.intersect1d(a["f"], b=a["f"]), TypeError),
    "dot_out_wrong_dtype": (lambda xp, a: xp.dot(a["u"], a["u"].reshape(2, 1),
                                                 out=xp.zeros(1, dtype="int64")), ValueError),
    "unstack_tuple": (lambda xp, a: xp.unstack((-1,)), (TypeError, AttributeError)),
    "rand_array_size": (lambda xp, a: xp.random.rand(xp.zeros(1, dtype=bool)), TypeError),
    "ones_dict_shape": (lambda xp, a: xp.ones({}), TypeError),
    "roll_huge_axis_empty_shift": (lambda xp, a: xp.roll(a["m"], [], axis=2**63),
                                   (OverflowError, TypeError, np.exceptions.AxisError)),
    "swapaxes_keyword": (lambda xp, a: a["m"].swapaxes(-1, axis2=-1), TypeError),
    "var_bool_axis": (lambda xp, a: a["m"].var(True), TypeError),
    "put_int_overflow": (lambda xp, a: xp.put(xp.zeros(4, dtype="int16"), [0], 2**31),
                         OverflowError),
    "put_keyword_values": (lambda xp, a: xp.put(a["f"], [0], values=1.0), TypeError),
    "pad_keyword_x": (lambda xp, a: xp.pad(x=a["f"], pad_width=1), TypeError),
    "zeros_like_subok_vector": (lambda xp, a: xp.zeros_like(a["f"], subok=xp.ones(1, dtype="int8")),
                                TypeError),
    "stack_0d": (lambda xp, a: xp.stack(a["s"]), TypeError),
    "percentile_bool": (lambda xp, a: xp.percentile(a["b"], 50), TypeError),
    "quantile_bool": (lambda xp, a: xp.quantile(a["b"], 0.5), TypeError),
    "var_bool_mean_bool": (lambda xp, a: xp.var(a["b"], mean=xp.zeros((1, 1), dtype=bool)),
                           TypeError),
    "array_ndmin_array": (lambda xp, a: xp.array(a["f"], ndmin=xp.zeros((1, 1), dtype="uint8")),
                          TypeError),
    "random_sample_dtype_positional": (lambda xp, a: xp.random.random_sample((1,), "float16"),
                                       TypeError),
    "fmod_reduce_complex_out": (lambda xp, a: xp.fmod.reduce(xp.asarray([7, 3]),
                                                             out=xp.zeros((), dtype="complex128")),
                                TypeError),
    "fromiter_2d_array": (lambda xp, a: xp.fromiter(xp.ones((2, 2)), "int8", count=1), ValueError),
    "resize_0d_shape": (lambda xp, a: xp.resize(a["f"], xp.asarray(2)), TypeError),
    "method_sort_axis_none": (lambda xp, a: a["f"].sort(axis=None), TypeError),
    "ravel_multi_index_0d_dims": (lambda xp, a: xp.ravel_multi_index(
        (xp.asarray([1]),), xp.asarray(True), mode="clip"), TypeError),
    "standard_gamma_third_positional": (lambda xp, a: xp.random.standard_gamma(1.0, 2, None),
                                        TypeError),
    # held-out fuzz seed 5
    "where_one_of_x_y_none": (lambda xp, a: xp.where(a["b"], None), ValueError),
    "bool_empty_with_int_past_int64": (lambda xp, a: xp.bitwise_xor(-2**63 - 1, a["b"][:0]),
                                       OverflowError),
    "bool_with_int_past_int64": (lambda xp, a: xp.add(a["b"], 2**64), OverflowError),
    "unique_keyword_x": (lambda xp, a: xp.unique(x=a["f"]), TypeError),
    # held-out fuzz seed 6
    "put_float_out_of_unsigned_range": (lambda xp, a: xp.put(a["u"], [0], -1.5), OverflowError),
    "put_float_list_out_of_range": (lambda xp, a: xp.put(xp.zeros(2, dtype="int8"), [0],
                                                         [300.5]), OverflowError),
    "put_nan_into_int": (lambda xp, a: xp.put(a["i"], [0], float("nan")), ValueError),
    "trim_zeros_bad_trim": (lambda xp, a: xp.trim_zeros(a["f"], trim="abc"), ValueError),
    "partition_keyword_x": (lambda xp, a: xp.partition(x=a["f"], kth=0), TypeError),
    "argpartition_keyword_x": (lambda xp, a: xp.argpartition(x=a["f"], kth=0), TypeError),
    "resize_keyword_x": (lambda xp, a: xp.resize(x=a["f"], new_shape=2), TypeError),
    "var_mean_is_a_type": (lambda xp, a: xp.var(a["f"], mean=xp.complex128), TypeError),
    "argsort_tuple_axis_0d": (lambda xp, a: a["s"].argsort(axis=(0, 1)), TypeError),
    "sort_float_axis": (lambda xp, a: xp.sort(a["f"], axis=1.5), TypeError),
    "random_size_bool_array": (lambda xp, a: xp.random.random_sample(a["b"][0]), TypeError),
    "bool_0d_is_no_index": (lambda xp, a: [1, 2][xp.asarray(True)], TypeError),
    "split_0d_sections_unequal": (lambda xp, a: xp.split(a["f"], xp.asarray(2)), ValueError),
    "pinv_rtol_none_and_rcond": (lambda xp, a: xp.linalg.pinv(a["m"], rcond=-1, rtol=None),
                                 ValueError),
    # held-out fuzz seed 7
    "transpose_float_array_axes": (lambda xp, a: xp.ones((1, 1, 1)).transpose(
        xp.zeros(1, dtype="float32")), TypeError),
    "transpose_empty_list_axes": (lambda xp, a: a["m"].transpose([]), ValueError),
    "round_scalar_with_out": (lambda xp, a: xp.round(10**12, out=xp.zeros((0, 3))), ValueError),
    "round_out_broadcast": (lambda xp, a: xp.round(a["f"], out=xp.zeros((2, 3))), ValueError),
    "round_int_out_broadcast": (lambda xp, a: xp.round(a["i"], out=xp.zeros((2, 3))),
                                ValueError),
    # held-out fuzz seeds 8 and 9
    "array_split_bool_indices": (lambda xp, a: xp.array_split(a["f"], xp.zeros(2, dtype=bool)),
                                 TypeError),
    "array_split_float_indices": (lambda xp, a: xp.array_split(a["f"], xp.ones(1)), TypeError),
    "repeat_empty_complex_repeats": (lambda xp, a: a["f"][:0].repeat(
        xp.zeros(0, dtype="complex64")), TypeError),
    "nan_to_num_scalar_in_place": (lambda xp, a: xp.nan_to_num(2**31, False), ValueError),
    "nan_to_num_list_in_place": (lambda xp, a: xp.nan_to_num([1.0], copy=False), ValueError),
    "fill_keyword_value": (lambda xp, a: a["f"].fill(value=1.0), TypeError),
    # held-out fuzz seeds 10 and 11
    "fromiter_like_a_float": (lambda xp, a: xp.fromiter((1, 2), "float32", like=1.5),
                              TypeError),
    "hsplit_keyword_x": (lambda xp, a: xp.hsplit(x=a["f"], indices_or_sections=1), TypeError),
    "split_keyword_x": (lambda xp, a: xp.split(x=a["f"], indices_or_sections=1), TypeError),
    "view_none_0d_itemsize": (lambda xp, a: xp.asarray(3, dtype="int16").view(None),
                              ValueError),
    "meshgrid_ragged_list": (lambda xp, a: xp.meshgrid([[1, 2], [3]]), ValueError),
    "broadcast_shapes_dict": (lambda xp, a: xp.broadcast_shapes({}), TypeError),
    "broadcast_shapes_set": (lambda xp, a: xp.broadcast_shapes({1, 2}), TypeError),
    "sum_empty_initial_none": (lambda xp, a: xp.sum(a["f"][:0], initial=None), ValueError),
    # held-out fuzz seeds 12 and 13
    "transpose_bool_array_axes": (lambda xp, a: xp.ones(1).transpose(xp.zeros(1, dtype=bool)),
                                  TypeError),
    "flatten_array_order": (lambda xp, a: a["m"].flatten(a["f"], 2), TypeError),
    "nanmean_where_a_type": (lambda xp, a: xp.nanmean(a["i"], where=np.float64), TypeError),
    "split_axis_none": (lambda xp, a: xp.split(a["f"], 3, axis=None), TypeError),
    "interp_left_1d_array": (lambda xp, a: xp.interp(-2.0, a["f"], a["f"], left=xp.ones(1)),
                             TypeError),
    # held-out fuzz seeds 14 and 15
    "view_dtype_none_keyword": (lambda xp, a: xp.zeros(1, dtype="float32").view(dtype=None),
                                ValueError),
    "reshape_bool_shape_array": (lambda xp, a: xp.reshape(xp.ones(1), xp.ones(1, dtype=bool)),
                                 TypeError),
    # held-out fuzz seed 16
    "argmax_complex_out": (lambda xp, a: a["f"].argmax(out=xp.zeros((), dtype="complex64")),
                           TypeError),
    "argmin_float_out": (lambda xp, a: xp.argmin(a["f"], out=xp.zeros(())), TypeError),
    # held-out fuzz seed 18
    "broadcast_shapes_bools": (lambda xp, a: xp.broadcast_shapes([True, False, True]),
                               TypeError),
    "zeros_like_float_subok": (lambda xp, a: xp.zeros_like(a["f"], subok=xp.asarray(0.0)),
                               TypeError),
    # seeds 1 and 2 rerun at the end
    "std_uint8_mean_negative_int": (lambda xp, a: xp.std(xp.ones(3, dtype="uint8"), mean=-7),
                                    OverflowError),
    "resize_bool_shape_array": (lambda xp, a: xp.resize(a["f"], xp.ones(1, dtype=bool)),
                                TypeError),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_refused_like_numpy(name):
    call, exc = CASES[name]
    with pytest.raises(exc):
        call(np, _arrays(np))              # the oracle refuses it
    with pytest.raises(exc) as info:
        call(ember, _arrays(ember))
    assert str(info.value)                 # with a message


@pytest.mark.parametrize("call", [
    lambda xp, a: (xp.add.at(a["f"], [0, 0], 1.0), a["f"])[1],
    lambda xp, a: xp.multiply.outer(a["f"], a["f"]),
    lambda xp, a: xp.add(a["i"], a["i"], dtype=float),
    lambda xp, a: xp.sqrt(a["i"], dtype="float32"),
    lambda xp, a: xp.sum(a["f"], keepdims=True),
    lambda xp, a: xp.ones_like(a["f"], order="F"),
    lambda xp, a: (a["f"].fill(xp.asarray(7.0)), a["f"])[1],
    lambda xp, a: xp.conj(xp.ones(1, dtype="float64"), out=xp.zeros((2, 3))),
    lambda xp, a: xp.sort(a["s"], axis=None),
    lambda xp, a: xp.copy(a["f"], order="K"),
])
def test_still_accepted_like_numpy(call):
    """The checks above do not refuse what NumPy accepts: same values."""
    want = call(np, _arrays(np))
    got = call(ember, _arrays(ember))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    # ember's default float dtype is float32 where NumPy's is float64
    assert np.asarray(got).dtype == want.dtype or (want.dtype == np.float64
                                                    and np.asarray(got).dtype == np.float32)


def test_var_and_std_use_a_given_mean_as_numpy_does():
    x = np.arange(12.0).reshape(3, 4)
    for xp in (np, ember):
        a = xp.asarray(x)
        m = xp.mean(a, axis=1, keepdims=True) + 1.0       # a deliberately shifted mean
        got = xp.var(a, axis=1, mean=m), xp.std(a, axis=1, mean=m, ddof=1)
        if xp is np:
            want = got
    np.testing.assert_allclose(np.asarray(got[0]), want[0], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(got[1]), want[1], rtol=1e-6)
    with pytest.raises(ValueError, match="mean= of shape"):
        ember.var(ember.asarray(x), axis=1, mean=ember.zeros((4, 1)))


def test_numpy_readings_that_differ_from_pytorch_forms():
    """view(None) is a float64 view and a list of lists is one meshgrid input (NumPy);
    meshgrid([a, b]) of arrays stays PyTorch's form."""
    x = np.arange(2, dtype=np.int64)
    assert ember.asarray(x).view(None).dtype == x.view(None).dtype == np.float64
    want = np.meshgrid([[1, 2], [3, 4]])
    got = ember.meshgrid([[1, 2], [3, 4]])
    assert len(got) == len(want) == 1
    np.testing.assert_array_equal(np.asarray(got[0]), want[0])
    a, b = ember.arange(3), ember.arange(2)
    assert [g.shape for g in ember.meshgrid([a, b])] == [(2, 3), (2, 3)]


def test_chunk_of_an_empty_axis_into_absurdly_many_pieces_fails_at_once():
    x = ember.zeros((0, 3))
    assert len(ember.chunk(x, 4)) == 4             # PyTorch's empty views
    with pytest.raises(MemoryError, match="chunk: 4611686018427387904 sections"):
        ember.chunk(x, np.array(2**62))


def test_put_wrap_with_a_huge_index_answers_at_once():
    """Held-out fuzz seed 17: NumPy's wrap mode subtracts the size until the index fits
    (10**18 into 16 elements: minutes); ember takes the remainder, the same index."""
    x, want = ember.zeros((4, 4)), np.zeros((4, 4))
    ember.put(x, [10**18, -3], [1.5, 2.5], mode="wrap")
    np.put(want, [10**18 % 16, -3 % 16], [1.5, 2.5])
    np.testing.assert_array_equal(np.asarray(x), want)
    a = np.arange(16.0).reshape(4, 4)
    for axis in (None, 1):
        got = ember.take(ember.asarray(a), [10**18, -5, 3], axis=axis, mode="wrap")
        n = a.size if axis is None else 4
        np.testing.assert_array_equal(np.asarray(got), np.take(
            a, [10**18 % n, -5 % n, 3], axis=axis))
