"""The host-side bookkeeping of GPU arrays, checked without a GPU.

An ember array over *device* memory is built here from a made-up device address
that nothing ever dereferences; these tests check only pointers, shapes, strides
and refusals: the CuPy views the GPU backend makes (offsets of slices and
negative strides), storage sharing when a CuPy view comes back, the CUDA Array
Interface, the packing of kernel arguments, and that host code refuses device
memory with an error instead of crashing.  The GPU results themselves are tested
in test_cuda_device.py / _nn / _autograd, on a GPU.
"""
import struct

import numpy as np
import pytest

import ember
from ember._core import array as _array

cupy = pytest.importorskip("cupy", reason="CuPy is not installed (pip install '.[test]')")

FAKE = 1 << 40          # a device address that is never dereferenced


class _Owner:
    """Stands for the CuPy memory block that owns real device memory."""


def fake_device_array(shape, dtype=np.float32, offset_items=0, nbytes=None):
    dt = np.dtype(dtype)
    n = int(np.prod(shape)) if shape else 1
    strides = []
    st = dt.itemsize
    for d in reversed(shape):
        strides.insert(0, st)
        st *= max(d, 1)
    nb = nbytes if nbytes is not None else (n + offset_items) * dt.itemsize
    return _array._wrap_device_memory(FAKE, nb, _Owner(), 0, tuple(shape), tuple(strides),
                                      offset_items * dt.itemsize, dt)


def test_a_device_array_reports_its_device():
    x = fake_device_array((4, 8))
    assert x.is_cuda and not x.is_cpu and x.get_device() == 0
    assert x.device == "cuda:0" and str(x.device) == "cuda:0"
    assert x.storage.device == "cuda:0" and x.storage.is_cuda
    assert x.__dlpack_device__() == (2, 0)
    assert x.data_ptr() == FAKE


def test_host_code_refuses_device_memory_instead_of_crashing():
    x = fake_device_array((3,))
    with pytest.raises(TypeError, match="cuda:0"):
        np.asarray(x)
    with pytest.raises(TypeError, match="cpu"):
        x.numpy()
    with pytest.raises(TypeError):
        _array._numpy(x)
    if not ember.cuda.is_available():
        # no GPU backend: a host loop gets the device array and must refuse it
        with pytest.raises(RuntimeError, match="CPU kernel"):
            x + 1


@pytest.mark.parametrize("view", ["whole", "row", "column", "reversed", "step", "transposed"])
def test_cupy_views_point_at_the_first_element(view):
    from ember.cuda import _runtime as R
    base = fake_device_array((6, 5), np.float64)
    x = {"whole": lambda b: b, "row": lambda b: b[2], "column": lambda b: b[:, 3],
         "reversed": lambda b: b[::-1], "step": lambda b: b[1::2, ::-2],
         "transposed": lambda b: b.T}[view](base)
    c = R.as_cupy(x)
    assert c.shape == x.shape and c.strides == x.strides and c.dtype == x.dtype
    assert c.data.ptr == x.data_ptr()
    # back to ember: a view of the same Storage (one version counter), same layout
    y = R.from_cupy(c)
    assert y.storage is base.storage
    assert (y.shape, y.strides, y.data_ptr()) == (x.shape, x.strides, x.data_ptr())


def test_foreign_cupy_memory_keeps_negative_strides_in_bounds():
    from ember.cuda import _runtime as R
    mem = cupy.cuda.UnownedMemory(FAKE, 80, _Owner(), 0)
    c = cupy.ndarray((10,), np.float64, cupy.cuda.MemoryPointer(mem, 72), strides=(-8,))
    y = R.from_cupy(c)
    assert y.is_cuda and y.data_ptr() == FAKE + 72 and y.strides == (-8,)
    assert y.storage.data_ptr == FAKE and y.storage.nbytes == 80


def test_cuda_array_interface():
    x = fake_device_array((4, 8))
    cai = x.__cuda_array_interface__
    assert cai["shape"] == (4, 8) and cai["typestr"] == "<f4" and cai["version"] == 3
    assert cai["data"] == (FAKE, False) and cai["strides"] is None
    t = x.T.__cuda_array_interface__
    assert t["strides"] == (4, 32) and t["data"][0] == FAKE
    assert not hasattr(ember.zeros(2), "__cuda_array_interface__")


def test_strided_kernel_arguments_match_the_c_struct():
    """StridedArgs {int ndim; i64 shape[8]; i64 strides[3][8]} in elements, operand 0 the
    output, broadcast axes with stride 0 (elementwise.cu)."""
    from ember.cuda._elementwise import _strided_args
    y = fake_device_array((2, 3, 4))
    a = fake_device_array((2, 3, 4)).transpose((0, 2, 1)).transpose((0, 2, 1))
    b = fake_device_array((3, 1))
    raw = _strided_args((2, 3, 4), y, a, b)
    assert len(raw) == 4 + 4 + 8 * 8 + 3 * 8 * 8
    ndim, = struct.unpack_from("<i", raw, 0)
    words = struct.unpack_from("<32q", raw, 8)
    assert ndim == 3
    assert words[:3] == (2, 3, 4)
    assert words[8:11] == (12, 4, 1)            # y
    assert words[16:19] == (12, 4, 1)           # a
    assert words[24:27] == (0, 1, 0)            # b (3, 1) broadcast against (2, 3, 4)


def test_mixing_devices_is_named_in_the_error():
    from ember.cuda import _dispatch, _elementwise
    g = fake_device_array((3,))
    c = ember.zeros(3)
    gpu, other, shape = _dispatch._devices((g, c), {})
    assert (str(gpu), str(other), tuple(shape)) == ("cuda:0", "cpu", (3,))
    with pytest.raises(RuntimeError, match="cuda:0 and cpu"):
        _elementwise._operand(c, g.device, "add")


def test_unavailable_cuda_is_a_clear_error():
    if ember.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="CUDA is not usable here"):
        ember.zeros(3, device="cuda")
    with pytest.raises(RuntimeError, match="CUDA"):
        ember.ones(2).to("cuda")
    assert ember.cuda.device_count() == 0
    assert ember.cuda.is_bf16_supported() is False
    for fn in (ember.cuda.get_device_properties, ember.cuda.get_device_capability,
               ember.cuda.mem_get_info):
        name = "mem_get_info" if fn is ember.cuda.mem_get_info else "get_device_properties"
        with pytest.raises(RuntimeError, match=f"ember.cuda.{name}: CUDA is not available"):
            fn()


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "bfloat16"])
def test_the_gpu_spacing_formula_is_numpys(dtype):
    """ember.cuda's spacing is a formula over nextafter; run with NumPy as the array
    module it must give np.spacing exactly (signed zeros, infinities, NaN, extremes)."""
    from ember.cuda.ops_core import spacing_of
    dt = np.dtype(getattr(ember, dtype))
    info = ember.finfo(dt)
    special = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, float(info.max), -float(info.max),
               float(info.tiny), -float(info.tiny), 3.0e-3, -7.5]
    with np.errstate(all="ignore"):
        x = np.concatenate([np.array(special, np.float64),
                            np.random.default_rng(0).standard_normal(200) * 100]).astype(dt)
        got = spacing_of(np, x)
        want = np.spacing(x)
    assert got.dtype == want.dtype == dt
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def test_bfloat16_on_the_gpu_checks_cupy_knows_it(monkeypatch):
    """CuPy >= 14 handles ml_dtypes' bfloat16 (installed here); an older one gets a
    clear error naming the version instead of a failure deep inside CuPy."""
    from ember.cuda import _runtime as R
    monkeypatch.setattr(R, "_BF16_OK", [])
    R.check_bfloat16()                          # this CuPy: supported
    assert R._BF16_OK == [True]
    from cupy._core import _dtype

    def refuses(dt):
        raise TypeError(f"unsupported dtype {dt}")
    monkeypatch.setattr(R, "_BF16_OK", [])
    monkeypatch.setattr(_dtype, "to_cuda_dtype", refuses)
    with pytest.raises(TypeError, match=r"bfloat16 arrays on the GPU need CuPy >= 14"):
        R.check_bfloat16()
