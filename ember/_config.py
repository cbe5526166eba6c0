"""``ember.show_config()``: how ember was built and what it found at run time.

Nothing here runs at ``import ember``: CuPy, SciPy and MPI are looked at only when
``show_config`` is called (CuPy is imported then, if installed; MPI is queried in a
child process unless ``mpi4py.MPI`` is already loaded, because importing it
initialises MPI).

>>> import ember
>>> cfg = ember.show_config(mode="dicts")
>>> sorted(cfg)[:3]
['BLAS', 'Build', 'CPU']
"""
import os
import sys

__all__ = ["show_config"]


def _version(dist):
    import importlib.metadata as metadata       # (slow to import: only when asked)
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _build():
    try:
        from ember import _build_config as b
    except ImportError:
        return {"note": "no build record (ember/_build_config.py is written by meson)"}
    return {"compiler": dict(b.COMPILER), "cython": b.CYTHON_VERSION,
            "buildtype": b.BUILDTYPE, "openmp": b.OPENMP, "avx2_loops_built": b.AVX2_LOOPS_BUILT,
            "numpy_at_build": b.NUMPY_VERSION, "meson": b.MESON_VERSION, "host": dict(b.HOST)}


def _cpu():
    import platform
    from ember._core import elementwise
    from ember._kernels.cpu import reduce
    return {"simd": {"elementwise_loops": elementwise.LOOP_ISA,
                     "reductions": "avx2" if reduce._avx2_enabled() else "baseline",
                     "EMBER_NO_AVX2": os.environ.get("EMBER_NO_AVX2", "")},
            "threads": elementwise.get_num_threads(),
            "openmp_max_threads": elementwise._omp_max_threads(),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", ""),
            "machine": platform.machine(), "processor": platform.processor() or None,
            "cpu_count": os.cpu_count()}


def _blas():
    from ember._kernels.cpu import gemm
    import numpy as np
    out = {"ember_gemm": {"library": getattr(gemm, "BLAS_LIBRARY", None),
                          "driven_by_ember_threads": bool(gemm.available()),
                          # bfloat16 products on ember's AVX512-BF16 kernel (else widened
                          # to float32 for the BLAS above)
                          "bfloat16_kernel": "avx512_bf16" if gemm.bf16_kernel() else None}}
    try:
        deps = np.show_config(mode="dicts")["Build Dependencies"]
        out["numpy"] = {k: {f: deps[k].get(f) for f in ("name", "version", "openblas configuration")
                            if f in deps[k]} for k in ("blas", "lapack") if k in deps}
    except Exception as err:                                  # pragma: no cover
        out["numpy"] = f"unknown ({type(err).__name__})"
    if _version("scipy") is not None:
        try:
            import scipy
            deps = scipy.show_config(mode="dicts")["Build Dependencies"]
            out["scipy"] = {k: {f: deps[k].get(f) for f in ("name", "version") if f in deps[k]}
                            for k in ("blas", "lapack") if k in deps}
            out["scipy"]["version"] = scipy.__version__
        except Exception as err:
            out["scipy"] = f"installed, not queried ({type(err).__name__}: {err})"
    else:
        out["scipy"] = "not installed"
    return out


def _gpu():
    dists = {d: _version(d) for d in ("cupy-cuda13x", "cupy-cuda12x", "cupy")}
    installed = {d: v for d, v in dists.items() if v}
    out = {"cupy_distribution": installed or "not installed",
           "emulation": os.environ.get("EMBER_CUDA_EMULATION", "") not in ("", "0")}
    for d in ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-nccl-cu13", "nvidia-nccl-cu12",
              "nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu12"):
        if _version(d):
            out.setdefault("nvidia_wheels", {})[d] = _version(d)
    if not installed and "cupy" not in sys.modules:
        return out
    try:
        import cupy
    except Exception as err:
        out["cupy"] = f"does not import ({type(err).__name__}: {err})"
        return out
    out["cupy"] = getattr(cupy, "__version__", "?")
    rt = cupy.cuda.runtime
    for key, fn in (("cuda_runtime", rt.runtimeGetVersion), ("cuda_driver", rt.driverGetVersion)):
        try:
            v = fn()
            out[key] = f"{v // 1000}.{v % 1000 // 10}" if v else "none"
        except Exception as err:
            out[key] = f"unavailable ({type(err).__name__}: {err})"
    try:
        n = rt.getDeviceCount()
        out["devices"] = [rt.getDeviceProperties(i)["name"].decode() for i in range(n)]
    except Exception as err:
        out["devices"] = f"none ({type(err).__name__}: {err})"
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # CuPy warns when it cannot load NCCL
        out.update(_cuda_libraries())
    return out


def _cuda_libraries():
    out = {}
    try:
        from cupy.cuda import cudnn
        out["cudnn"] = str(cudnn.getVersion())
    except Exception as err:
        out["cudnn"] = f"unavailable ({type(err).__name__}: {err})"
    try:
        from cupy.cuda import nccl
        out["nccl"] = str(nccl.get_version()) if nccl.available else "unavailable"
    except Exception as err:
        out["nccl"] = f"unavailable ({type(err).__name__})"
    return out


_MPI_PROBE = "from mpi4py import MPI; print(MPI.Get_library_version().strip().splitlines()[0]); " \
             "print('%d.%d' % MPI.Get_version())"


def _mpi():
    import shutil
    import subprocess
    out = {"mpi4py": _version("mpi4py") or "not installed",
           "mpich_wheel": _version("mpich"), "mpiexec": shutil.which("mpiexec")}
    if out["mpi4py"] == "not installed":
        return out
    mod = sys.modules.get("mpi4py.MPI")
    try:
        if mod is not None:
            lib, std = mod.Get_library_version().strip().splitlines()[0], \
                "%d.%d" % mod.Get_version()
        else:
            r = subprocess.run([sys.executable, "-c", _MPI_PROBE], capture_output=True,
                               text=True, timeout=30)
            if r.returncode:
                raise RuntimeError(r.stderr.strip().splitlines()[-1] if r.stderr else "failed")
            lib, std = r.stdout.strip().splitlines()[:2]
        out["library"], out["mpi_standard"] = lib, std
    except Exception as err:
        out["library"] = f"not queried ({type(err).__name__}: {err})"
    return out


def show_config(mode="stdout"):
    """Print ember's build and run-time configuration: version, compiler, the SIMD loops
    chosen for this CPU, OpenMP threads, the BLAS, CuPy / CUDA / cuDNN / NCCL, MPI
    (``mode="dicts"`` returns it as a dict instead, as NumPy's ``show_config``).

    >>> import ember
    >>> ember.show_config(mode="dicts")["ember"]["version"] == ember.__version__
    True
    """
    import platform
    import ember
    import numpy as np
    cfg = {
        "ember": {"version": ember.__version__, "path": os.path.dirname(ember.__file__),
                  "default_dtype": str(ember.get_default_dtype()),
                  "EMBER_DEFAULT_DTYPE": os.environ.get("EMBER_DEFAULT_DTYPE", "")},
        "Python": {"version": platform.python_version(),
                   "implementation": platform.python_implementation()},
        "Dependencies": {"numpy": np.__version__, "ml_dtypes": _version("ml_dtypes")},
        "Build": _build(),
        "CPU": _cpu(),
        "BLAS": _blas(),
        "GPU": _gpu(),
        "MPI": _mpi(),
    }
    if mode == "dicts":
        return cfg
    if mode != "stdout":
        raise ValueError(f"show_config: mode must be 'stdout' or 'dicts', got {mode!r}")
    lines = []

    def emit(d, indent):
        for k, v in d.items():
            if isinstance(v, dict):
                lines.append(" " * indent + f"{k}:")
                emit(v, indent + 2)
            else:
                lines.append(" " * indent + f"{k}: {v}")
    emit(cfg, 0)
    print("\n".join(lines))
