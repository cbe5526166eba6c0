"""cuDNN 9, loaded at run time: the library, its function table, its status codes.

This is the one boundary between ember and cuDNN: everything else reaches the library
through :func:`lib`, whose attributes are cuDNN's C entry points under their C names,
called with the C arguments (descriptors and device pointers as ints, out-parameters
as ctypes instances, host scalars as their address).  The emulated tests put a NumPy
model of the same functions in its place with :func:`set_table`.

Which API: the legacy C API (``cudnnConvolutionForward`` / ``BackwardData`` /
``BackwardFilter`` with ``cudnnGet*Algorithm_v7`` heuristics or ``cudnnFind*AlgorithmEx``
benchmarking, ``cudnnBatchNormalization*``), called through ctypes, not the graph
(backend) API nor NVIDIA's cudnn-frontend.  Reasons: once its descriptors are cached an
op is a single cuDNN call (the graph API needs a variant pack built per call, and each
ctypes call costs about a microsecond of host time); its algorithm lists carry a
determinism flag per algorithm and map one to one onto PyTorch's ``benchmark`` /
``deterministic`` switches; the whole binding is about thirty functions with fixed C
signatures, small enough to replace by a NumPy model in the tests; and it needs neither
a compiler nor another package.  The cost: these functions are marked deprecated in
cuDNN 9 (they still ship and run on every cuDNN 9 release); fused attention and fused
conv + bias + activation graphs will need the graph API (issue 21, section 3).

Where the library comes from, first match wins: a ``libcudnn.so.9`` the process has
loaded already (PyTorch's, for one: two copies in a process are avoided), the
``nvidia-cudnn-cu13`` / ``-cu12`` wheel (``<site-packages>/nvidia/cudnn/lib``; the
``cuda`` extra installs it), then the system's loader path.  A library that is missing,
older than 9, or lacks a function leaves cuDNN unavailable and ember's own kernels run.

>>> from ember.cuda import _cudnn_lib
>>> _cudnn_lib.status_name(3000)
'CUDNN_STATUS_NOT_SUPPORTED'
"""
import ctypes
import os
import sys

__all__ = ["lib", "set_table", "unavailable_reason", "version", "status_name",
           "is_not_supported", "PerfResult"]

# ---------------------------------------------------------------- enums (cudnn_*.h, 9.x)
SUCCESS = 0
DATA = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 9}   # cudnnDataType_t
TENSOR_NCHW, TENSOR_NHWC = 0, 1                                   # cudnnTensorFormat_t
CROSS_CORRELATION = 1                                              # cudnnConvolutionMode_t
DEFAULT_MATH, TENSOR_OP_MATH, TENSOR_OP_MATH_ALLOW_CONVERSION, FMA_MATH = 0, 1, 2, 3
NON_DETERMINISTIC, DETERMINISTIC = 0, 1                            # cudnnDeterminism_t
BATCHNORM_SPATIAL, BATCHNORM_SPATIAL_PERSISTENT = 1, 2            # cudnnBatchNormMode_t
#: cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t's ALGO_COUNT
ALGO_COUNT = {"forward": 8, "backward_data": 6, "backward_filter": 7}

_STATUS = {
    0: "SUCCESS", 1001: "NOT_INITIALIZED", 1002: "SUBLIBRARY_VERSION_MISMATCH",
    1003: "SERIALIZATION_VERSION_MISMATCH", 1004: "DEPRECATED", 1005: "LICENSE_ERROR",
    1006: "RUNTIME_IN_PROGRESS", 1007: "RUNTIME_FP_OVERFLOW",
    1008: "SUBLIBRARY_LOADING_FAILED", 2000: "BAD_PARAM", 2001: "INVALID_VALUE",
    2002: "BAD_PARAM_NULL_POINTER", 2003: "BAD_PARAM_MISALIGNED_POINTER",
    2004: "BAD_PARAM_NOT_FINALIZED", 2005: "BAD_PARAM_OUT_OF_BOUND",
    2006: "BAD_PARAM_SIZE_INSUFFICIENT", 2007: "BAD_PARAM_STREAM_MISMATCH",
    2008: "BAD_PARAM_SHAPE_MISMATCH", 2009: "BAD_PARAM_DUPLICATED_ENTRIES",
    2010: "BAD_PARAM_ATTRIBUTE_TYPE", 2011: "BAD_PARAM_CUDA_GRAPH_MISMATCH",
    2012: "BAD_PARAM_DESCRIPTOR_TYPE", 3000: "NOT_SUPPORTED",
    3001: "NOT_SUPPORTED_GRAPH_PATTERN", 3002: "NOT_SUPPORTED_SHAPE",
    3003: "NOT_SUPPORTED_DATA_TYPE", 3004: "NOT_SUPPORTED_LAYOUT",
    3005: "NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER", 3006: "NOT_SUPPORTED_INCOMPATIBLE_CUDART",
    3007: "NOT_SUPPORTED_ARCH_MISMATCH", 3008: "NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING",
    3009: "NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE",
    3010: "NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT", 3011: "NOT_SUPPORTED_PADDING",
    3012: "NOT_SUPPORTED_BAD_LAUNCH_PARAM", 3013: "NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API",
    3014: "NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE", 4000: "INTERNAL_ERROR",
    4001: "INTERNAL_ERROR_COMPILATION_FAILED", 4002: "INTERNAL_ERROR_UNEXPECTED_VALUE",
    4003: "INTERNAL_ERROR_HOST_ALLOCATION_FAILED",
    4004: "INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED", 4005: "INTERNAL_ERROR_BAD_LAUNCH_PARAM",
    4006: "INTERNAL_ERROR_TEXTURE_CREATION_FAILED", 5000: "EXECUTION_FAILED",
    5001: "EXECUTION_FAILED_CUDA_DRIVER", 5002: "EXECUTION_FAILED_CUBLAS",
    5003: "EXECUTION_FAILED_CUDART", 5004: "EXECUTION_FAILED_CURAND",
}


def status_name(status):
    """cudnnStatus_t code -> its name in cudnn_graph.h."""
    return "CUDNN_STATUS_" + _STATUS.get(int(status), f"UNKNOWN_{int(status)}")


def is_not_supported(status):
    """Whether `status` is in the NOT_SUPPORTED category (3xxx): cuDNN refuses the
    configuration, ember's own kernels take it."""
    return int(status) // 1000 == 3


class PerfResult(ctypes.Structure):
    """cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t (one layout for the three)."""
    _fields_ = [("algo", ctypes.c_int), ("status", ctypes.c_int), ("time", ctypes.c_float),
                ("memory", ctypes.c_size_t), ("determinism", ctypes.c_int),
                ("mathType", ctypes.c_int), ("reserved", ctypes.c_int * 3)]


# ---------------------------------------------------------------- the function table
_P = ctypes.c_void_p            # handles, descriptors, device and host pointers
_I = ctypes.c_int
_D = ctypes.c_double
_IP = ctypes.POINTER(ctypes.c_int)
_PP = ctypes.POINTER(ctypes.c_void_p)
_SP = ctypes.POINTER(ctypes.c_size_t)
_PERF = ctypes.POINTER(PerfResult)


def _conv_protos():
    """The three convolution directions share one argument pattern: inputs A and B,
    the convolution, output O (forward: x, w -> y; backward data: w, dy -> dx; backward
    filter: x, dy -> dw)."""
    out = {}
    for get, find, ws, run in (
            ("cudnnGetConvolutionForwardAlgorithm_v7", "cudnnFindConvolutionForwardAlgorithmEx",
             "cudnnGetConvolutionForwardWorkspaceSize", "cudnnConvolutionForward"),
            ("cudnnGetConvolutionBackwardDataAlgorithm_v7",
             "cudnnFindConvolutionBackwardDataAlgorithmEx",
             "cudnnGetConvolutionBackwardDataWorkspaceSize", "cudnnConvolutionBackwardData"),
            ("cudnnGetConvolutionBackwardFilterAlgorithm_v7",
             "cudnnFindConvolutionBackwardFilterAlgorithmEx",
             "cudnnGetConvolutionBackwardFilterWorkspaceSize", "cudnnConvolutionBackwardFilter")):
        out[get] = (_P, _P, _P, _P, _P, _I, _IP, _PERF)
        out[find] = (_P, _P, _P, _P, _P, _P, _P, _P, _I, _IP, _PERF, _P, ctypes.c_size_t)
        out[ws] = (_P, _P, _P, _P, _P, _I, _SP)
        out[run] = (_P, _P, _P, _P, _P, _P, _P, _I, _P, ctypes.c_size_t, _P, _P, _P)
    return out


#: name -> argtypes; every function returns a cudnnStatus_t (except cudnnGetVersion)
PROTOTYPES = {
    "cudnnCreate": (_PP,),
    "cudnnSetStream": (_P, _P),
    "cudnnCreateTensorDescriptor": (_PP,),
    "cudnnSetTensorNdDescriptor": (_P, _I, _I, _IP, _IP),
    "cudnnCreateFilterDescriptor": (_PP,),
    "cudnnSetFilterNdDescriptor": (_P, _I, _I, _I, _IP),
    "cudnnCreateConvolutionDescriptor": (_PP,),
    "cudnnSetConvolution2dDescriptor": (_P, _I, _I, _I, _I, _I, _I, _I, _I),
    "cudnnSetConvolutionGroupCount": (_P, _I),
    "cudnnSetConvolutionMathType": (_P, _I),
    "cudnnDeriveBNTensorDescriptor": (_P, _P, _I),
    "cudnnBatchNormalizationForwardTraining": (_P, _I, _P, _P, _P, _P, _P, _P, _P, _P, _P, _D,
                                               _P, _P, _D, _P, _P),
    "cudnnBatchNormalizationForwardInference": (_P, _I, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P,
                                                _P, _D),
    "cudnnBatchNormalizationBackward": (_P, _I, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P,
                                        _P, _P, _P, _D, _P, _P),
    **_conv_protos(),
}

_state = {"table": None, "reason": None, "tried": False, "listeners": []}


class _Unavailable(Exception):
    pass


def _candidates():
    """Paths to try for libcudnn.so.9, in order (see the module docstring)."""
    out = []
    for entry in sys.path:
        p = os.path.join(entry or ".", "nvidia", "cudnn", "lib", "libcudnn.so.9")
        if os.path.isfile(p) and p not in out:
            out.append(p)
    out.append("libcudnn.so.9")
    return out


def _open():
    """The CDLL of cuDNN 9, or _Unavailable with the reason."""
    try:                # already in the process (PyTorch's, or an earlier load)
        return ctypes.CDLL("libcudnn.so.9", mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
    except OSError:
        pass
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path, mode=os.RTLD_GLOBAL)
        except OSError as err:
            errors.append(f"{path}: {err}")
    raise _Unavailable("cuDNN 9 (libcudnn.so.9) was not found: install ember's `cuda` extra "
                       "(nvidia-cudnn-cu13) or put it on the loader path; tried "
                       + "; ".join(errors))


class _Table:
    """cuDNN's functions as attributes, with their C prototypes."""

    def __init__(self, cdll):
        get_version = cdll.cudnnGetVersion
        get_version.argtypes, get_version.restype = (), ctypes.c_size_t
        v = int(get_version())
        if not 90000 <= v < 100000:
            raise _Unavailable(f"ember needs cuDNN 9, the library found is version {v}")
        self.cudnnGetVersion = get_version
        for name, argtypes in PROTOTYPES.items():
            try:
                fn = getattr(cdll, name)
            except AttributeError:
                raise _Unavailable(f"the cuDNN library found (version {v}) has no {name}") \
                    from None
            fn.argtypes, fn.restype = argtypes, ctypes.c_int
            setattr(self, name, fn)


def lib():
    """The function table (loading cuDNN on first use), or None when cuDNN is unavailable
    (:func:`unavailable_reason` says why)."""
    if _state["table"] is None and not _state["tried"]:
        _state["tried"] = True
        try:
            _state["table"] = _Table(_open())
        except _Unavailable as err:
            _state["reason"] = str(err)
    return _state["table"]


def unavailable_reason():
    """Why :func:`lib` is None (None while it is not, or before the first try)."""
    return None if _state["table"] is not None else _state["reason"]


def version():
    """cuDNN's version as an int (90800 for 9.8.0), or None when unavailable."""
    t = lib()
    return None if t is None else int(t.cudnnGetVersion())


def set_table(table, reason=None):
    """Put `table` (an object with cuDNN's functions as attributes, or None: cuDNN
    unavailable, for `reason`) in place of the library; returns the previous
    ``(table, reason)``.  Every cached handle, descriptor and algorithm is dropped (the
    listeners registered with :func:`on_change` run).  For the emulated tests."""
    prev = (_state["table"], _state["reason"])
    _state["table"], _state["reason"], _state["tried"] = table, reason, True
    for fn in _state["listeners"]:
        fn()
    return prev


def on_change(fn):
    """Call fn() whenever :func:`set_table` replaces the library."""
    _state["listeners"].append(fn)
    return fn
