"""The NCCL backend on a real GPU, one rank (the job needs no launcher).

Every collective is compared with NumPy; skipped (not faked) without a CUDA
device or without CuPy's NCCL bindings.
"""
import numpy as np
import pytest

import ember
import ember.distributed as dist
from cuda_helpers import HAVE_GPU

pytestmark = pytest.mark.skipif(not HAVE_GPU, reason="needs a real CUDA device")


@pytest.fixture
def nccl_group():
    try:
        from cupy.cuda import nccl  # noqa: F401
    except Exception as err:                  # pragma: no cover - depends on the CuPy build
        pytest.skip(f"CuPy has no NCCL bindings here ({err})")
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("nccl")
    yield
    dist.destroy_process_group()


def _gpu(a):
    return ember.asarray(a).to("cuda")


def test_single_rank_collectives_match_numpy(nccl_group):
    assert dist.get_backend() == "nccl" and dist.get_world_size() == 1
    a = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    for op in ("sum", "avg", "max", "min", "prod"):
        x = _gpu(a)
        dist.all_reduce(x, op=op)
        assert x.is_cuda
        np.testing.assert_allclose(np.asarray(x.cpu()), a)     # one rank: unchanged
    x = _gpu(a)
    dist.broadcast(x, src=0)
    np.testing.assert_array_equal(np.asarray(x.cpu()), a)
    out = [ember.zeros((3, 4), device="cuda")]
    dist.all_gather(out, _gpu(a))
    np.testing.assert_array_equal(np.asarray(out[0].cpu()), a)
    dst = ember.zeros((3, 4), device="cuda")
    dist.reduce_scatter(dst, [_gpu(a)])
    np.testing.assert_array_equal(np.asarray(dst.cpu()), a)
    work = dist.all_reduce(_gpu(a), async_op=True)
    work.wait()
    dist.barrier()


def test_non_contiguous_all_reduce(nccl_group):
    a = np.arange(24, dtype=np.float64).reshape(4, 6)
    x = _gpu(a)[:, ::2]
    dist.all_reduce(x, op="sum")
    np.testing.assert_array_equal(np.asarray(x.cpu()), a[:, ::2])


def test_ddp_of_a_gpu_model_reduces_in_gpu_buckets(nccl_group):
    from helpers import check_ddp_reducer_on
    check_ddp_reducer_on("cuda")


def test_ddp_device_ids_of_a_gpu_model(nccl_group):
    from ember import nn
    from ember.nn.parallel import DistributedDataParallel as DDP
    model = nn.Linear(3, 2).to("cuda")
    dev = model.weight.device
    for ok in ({"device_ids": [dev.index]}, {"device_ids": [str(dev)]},
               {"device_ids": [dev], "output_device": dev.index}):
        DDP(model, **ok)
    for bad in ({"device_ids": [dev.index + 1]}, {"device_ids": [0, 1]},
                {"output_device": "cuda:%d" % (dev.index + 1)}):
        with pytest.raises(ValueError, match="one device per process"):
            DDP(model, **bad)
