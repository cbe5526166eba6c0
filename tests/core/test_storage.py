"""Storage, the caching allocator, foreign memory and the array object's slots."""
import array as pyarray
import gc
import weakref

import numpy as np
import pytest

import ember


def _alloc(n):
    return ember.empty((n,), dtype="float64")


def test_memory_stats_track_allocation_and_peak():
    ember.reset_peak_memory_stats()
    base = ember.memory_stats()["allocated_bytes"]
    x = _alloc(1 << 20)                     # 8 MiB
    s = ember.memory_stats()
    assert s["allocated_bytes"] - base >= 8 << 20
    assert s["reserved_bytes"] >= s["allocated_bytes"]
    assert s["peak_allocated_bytes"] >= s["allocated_bytes"]
    del x
    s2 = ember.memory_stats()
    assert s2["allocated_bytes"] == base
    assert s2["peak_allocated_bytes"] >= base + (8 << 20)


def test_freed_block_is_reused_from_cache():
    x = _alloc(12345)
    del x
    hits = ember.memory_stats()["num_cache_hits"]
    os_allocs = ember.memory_stats()["num_os_allocs"]
    y = _alloc(12345)
    s = ember.memory_stats()
    assert s["num_cache_hits"] == hits + 1
    assert s["num_os_allocs"] == os_allocs
    del y


def test_empty_cache_releases_reserved_memory():
    x = _alloc(1 << 18)
    del x
    assert ember.memory_stats()["cached_bytes"] > 0
    ember.empty_cache()
    s = ember.memory_stats()
    assert s["cached_bytes"] == 0
    assert s["reserved_bytes"] == s["allocated_bytes"]


def test_caching_can_be_disabled():
    try:
        ember.set_allocator_caching(False)
        x = _alloc(4096)
        del x
        assert ember.memory_stats()["cached_bytes"] == 0
    finally:
        ember.set_allocator_caching(True)
    with pytest.raises(ValueError):
        ember.set_allocator_caching(True, cache_limit_bytes=-1)


def test_storage_lives_exactly_as_long_as_its_last_view():
    x = _alloc(100)
    view = x[10:20]
    nv = np.asarray(x[::2])                 # a NumPy view also keeps it alive
    ref = weakref.ref(x.storage)
    del x
    assert ref() is not None
    del view
    assert ref() is not None
    nv[0] = 1.0                             # memory still valid
    del nv
    assert ref() is None                    # freed at once: reference counting, no GC


def test_views_share_storage_and_version_counter():
    x = ember.zeros((4, 4))
    v = x[1:3, ::2]
    assert v.storage is x.storage
    before = x._version
    v[0, 0] = 7.0
    assert x._version == before + 1
    assert x[1, 0].item() == 7.0
    x += 1
    assert v._version == before + 2


def test_wraps_numpy_without_copy_and_keeps_it_alive():
    a = np.arange(10.0)
    x = ember.asarray(a)
    assert x.storage.is_foreign
    assert np.shares_memory(np.asarray(x), a)
    del a
    gc.collect()
    assert x.tolist() == list(np.arange(10.0))


def test_wraps_negative_stride_numpy_views():
    a = np.arange(12.0).reshape(3, 4)[::-1, ::-2]
    x = ember.asarray(a)
    assert x.strides == a.strides
    np.testing.assert_array_equal(np.asarray(x), a)


def test_wraps_buffer_protocol_objects():
    buf = bytearray(b"\x01\x02\x03")
    x = ember.asarray(buf)
    assert x.dtype == np.uint8
    x[0] = 9
    assert buf[0] == 9                      # writes through, no copy
    arr = pyarray.array("d", [1.5, 2.5])
    y = ember.asarray(arr)
    assert y.dtype == np.float64 and y.tolist() == [1.5, 2.5]


def test_foreign_memory_in_a_reference_cycle_never_reaches_the_allocator():
    # A view kept alive only by a reference cycle: the GC collects it and may clear
    # the Storage before the view lets go of it.  Foreign memory (NumPy's) must
    # still go back to its owner, never to ember's free lists (from there a later
    # ember array got NumPy's memory: heap corruption, seen as random aborts).
    keep = [np.zeros(8, np.uint8) for _ in range(20)]
    foreign = {k.ctypes.data for k in keep}
    gc.collect()                            # the Storages below are the youngest objects
    for k in keep:
        x = ember.asarray(k)
        assert x.storage.is_foreign and x.storage.data_ptr == k.ctypes.data
        cycle = [x[:]]                      # a view created after the Storage...
        cycle.append(cycle)                 # ...reachable only from a cycle
        del x, cycle
    gc.collect()
    got = [ember.empty((8,), dtype="uint8") for _ in range(2 * len(keep))]
    stolen = [g for g in got if g.storage.data_ptr in foreign]
    if stolen:                              # leave the broken blocks alone, then fail
        _LEAKED.append((keep, stolen))
    assert not stolen, f"{len(stolen)} NumPy buffers were recycled as ember storage"


_LEAKED = []


def test_readonly_foreign_memory_refuses_writes():
    x = ember.asarray(b"abc")
    with pytest.raises(ValueError, match="read-only"):
        x[0] = 1
    with pytest.raises(ValueError, match="read-only"):
        x.fill(0)


def test_array_attributes():
    x = ember.zeros((2, 3), dtype="int32")
    assert x.shape == (2, 3) and x.ndim == 2 and x.size == 6
    assert x.dtype == np.int32 and x.itemsize == 4 and x.nbytes == 24
    assert x.strides == (12, 4)
    assert x.device == "cpu" and str(x.device) == "cpu"
    assert x.T.shape == (3, 2) and x.mT.shape == (3, 2)
    assert x.numel() == 6 and x.dim() == 2
    assert ember.Tensor is ember.ndarray
    with pytest.raises(ValueError, match="mT"):
        ember.zeros((3,)).mT


def test_autograd_slots_exist_and_reject_integer_arrays():
    x = ember.zeros((2,), requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.grad is None and x.grad_fn is None
    with pytest.raises(RuntimeError, match="floating point"):
        ember.zeros((2,), dtype="int64").requires_grad = True


def test_unavailable_device_is_a_clear_error():
    with pytest.raises(RuntimeError, match="cuda"):
        ember.zeros((2,), device="cuda")
    with pytest.raises(ValueError, match="unknown device"):
        ember.zeros((2,), device="tpu")


def test_constructor_is_not_public():
    with pytest.raises(TypeError, match="asarray"):
        ember.ndarray((2, 3))


def test_scalar_conversions():
    x = ember.asarray([3.5])
    assert float(x) == 3.5 and int(x) == 3 and bool(x)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(ember.zeros((2,)))
    with pytest.raises(TypeError):
        len(ember.asarray(1.0))
    assert [v.item() for v in ember.asarray([1, 2, 3])] == [1, 2, 3]
    assert ember.asarray(5)[()].item() == 5
    assert list(range(10))[ember.asarray(3)] == 3


def test_wraps_a_bare_dlpack_capsule_without_copying():
    a = np.arange(4.0)
    cap = a.__dlpack__()
    x = ember.from_dlpack(cap)
    assert np.shares_memory(np.asarray(x), a)
    del a
    gc.collect()
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]          # the producer is kept alive
    b = np.arange(3, dtype=np.int16)
    y = ember.asarray(b.__dlpack__())
    assert y.dtype == np.int16 and y.tolist() == [0, 1, 2]
