"""ember's GPU backend on the CPU, for tests: ``EMBER_CUDA_EMULATION=1 pytest tests/...``.

CuPy is replaced by a NumPy stand-in (fakecupy: "device" memory is host memory), every
kernel launch runs the host build of the real CUDA kernel (tests/cuda_host_kernels.py:
the same .cu source, blocks and threads on the CPU), cuBLAS is the column-major model of
tests/cublas_model.py and CuPy ElementwiseKernels compile as host C++.  ember's own code
(dispatch, glue, autograd, the GPU ops) runs unchanged, so the GPU suites exercise it
without a GPU.  It is an emulation: it never counts as a GPU run, has no real streams,
and nothing of CUDA's timing or memory model.  It has one device, or N with
``EMBER_CUDA_EMU_DEVICES=N``: devices without peer access, where a CuPy call, kernel
launch or GEMM given an array of a device other than the current one fails (as CuPy's
peer-access check or an illegal address would on a GPU), results land on the current
device, and each device has its own pool and current stream.

Status (2026-11-23, second pass): every tests/cuda/test_cuda_*.py suite runs through
emulated (test_cuda_kernels' raw RawModule launches skip: they need NVRTC and a GPU).
Running them found real gaps of the GPU path, fixed with tests: sort/argsort keywords,
topk, msort, index_select, masked_fill, take modes and bounds, lexsort(axis),
nanquantile/nanpercentile, quantile's q, bfloat16 NaN-reductions, linalg result types
and checks, eye() inside a GPU backward, clip(min=/max=), where=/initial=.  fakecupy
accepts only the installed CuPy's signatures and wraps out-of-range indices as CuPy
does, so calls CuPy would refuse fail here too.  CI runs every suite emulated (about
five minutes on two cores), and tests/cuda/test_cuda_cupy_api.py checks the signatures.

Two devices (2026-11-23, third pass): with the suites' arrays on cuda:1 and device 0
current (EMBER_TEST_CUDA_DEVICE=1), 1,763 of test_cuda_device's 1,862 cases failed
before ember had a device guard; every suite passes now, and CI runs it that way too.
"""
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# kernels whose threads cooperate (shared memory, __syncthreads, warp shuffles): each block
# runs with real threads; their row / channel loops stride by gridDim, so the grid is
# shrunk like the others', except for the full reductions' pass 1 (one partial per block)
_COOPERATIVE = ("softmax_", "log_softmax_", "cross_entropy_fwd_", "layer_norm_fwd_",
                "layer_norm_bwd_input_", "batch_norm_stats_", "batch_norm_bwd_reduce_",
                "flash_")
_COOP_SUFFIX = ("_inner", "_full_pass1", "_full_pass2")


def active():
    return os.environ.get("EMBER_CUDA_EMULATION") == "1"


def _cooperative(name):
    stem = name[len("ember_"):]
    return stem.startswith(_COOPERATIVE) or stem.endswith(_COOP_SUFFIX)


def _same_device(what, args):
    """A kernel reads only arrays of the current device (the emulated devices have no
    peer access: on a GPU, another device's pointer is an illegal address)."""
    import fakecupy
    if fakecupy.N_DEVICES == 1:
        return
    cur = fakecupy.runtime.getDevice()
    for a in args:
        dev = a.get_device() if getattr(a, "is_cuda", False) else getattr(a, "_emu_dev", cur)
        if dev != cur:
            raise RuntimeError(f"{what}: an argument lives on cuda:{dev} but the launch is "
                               f"on cuda:{cur}: an illegal memory access on a GPU (emulated)")


def _launch(name, grid, block, args, shmem=0):
    import cuda_host_kernels as hk
    _same_device(name, args)
    if _cooperative(name):
        whole = name.endswith("_full_pass1")    # writes one partial per block
        hk.ember_launch(name, grid, block, args, max_threads=32,
                        max_blocks=None if whole else 3)
    else:
        hk.ember_launch(name, grid, block, args, max_threads=32, max_blocks=3,
                        cooperative=False)


def install():
    """Put the emulation in place of CuPy and the CUDA driver (before any GPU use)."""
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent))
    import fakecupy
    import elementwise_kernel
    from cublas_model import CublasModel
    fakecupy.ElementwiseKernel = elementwise_kernel.ElementwiseKernel
    mods = {"cupy": fakecupy, "cupy.cuda": fakecupy.cuda,
            "cupy.cuda.runtime": fakecupy.runtime, "cupy.cuda.device": fakecupy.cuda.device,
            "cupy.cuda.memory": fakecupy.cuda.memory, "cupy._core": fakecupy._core,
            "cupy._core._dtype": fakecupy._core._dtype, "cupy.linalg": fakecupy.linalg,
            "cupyx": fakecupy.cupyx}
    sys.modules.update(mods)
    from ember.cuda import _cudnn_lib, _gemm, _kernels, _launch, _runtime
    _launch.load_driver = lambda: None
    # no cuDNN here: the GPU ops run ember's own kernels (their fallback path);
    # tests/cuda/test_cuda_cudnn.py puts a NumPy model of cuDNN in place for its tests
    _cudnn_lib.set_table(None, "the CUDA emulation has no cuDNN (tests/cuda_emu)")
    _launch.register_contig = lambda *a: None       # no cuLaunchKernel fast path
    _launch.register_cast = lambda *a: None
    _runtime.launch = _launch_kernel                # R.launch, the one launch
    _kernels.function = lambda name: 0
    model = CublasModel()

    def gemm(p, first, second, c, alpha):
        _same_device("cublasGemmStridedBatchedEx", (first, second, c))
        return model(p, first, second, c, alpha)
    _gemm._cublas_gemm = gemm


_launch_kernel = _launch
