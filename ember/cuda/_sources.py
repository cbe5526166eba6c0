"""The CUDA C kernel sources of ember's GPU backend: the families in ``kernels/*.cu``,
their kernel names, the prelude pasting and the NVRTC options (read by the loader,
ember/cuda/_kernels.py, and by the compile checks; ``ember.cuda`` re-exports them).

>>> "elementwise" in FAMILIES
True
"""
from pathlib import Path

__all__ = ["FAMILIES", "DTYPES", "CASTS", "kernel_files", "kernel_source", "nvrtc_options",
           "kernel_names"]

_DIR = Path(__file__).with_name("kernels")
# the shared prelude: a .cu file too, so it compiles on its own (to an empty PTX)
_COMMON = "ember_common.cu"
_INCLUDE = f'#include "{_COMMON}"'

#: One ``.cu`` file per family, in ``kernels/``.
FAMILIES = ("elementwise", "reduce", "softmax", "norm", "index", "random", "optim", "pool_conv",
            "attention")

#: Kernel name suffix per NumPy dtype name.
DTYPES = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}
_ALL = tuple(DTYPES.values())


def kernel_files():
    """Paths of the ``.cu`` sources, in ``FAMILIES`` order."""
    return [_DIR / f"{family}.cu" for family in FAMILIES]


def kernel_source(family):
    """The source of ``family`` with the shared prelude pasted in place of its
    ``#include``: one self-contained string, so NVRTC needs no include path for
    it and CuPy's source-keyed cache sees edits to the prelude too."""
    if family not in FAMILIES:
        raise ValueError(f"unknown CUDA kernel family {family!r}; expected one of {FAMILIES}")
    text = (_DIR / f"{family}.cu").read_text()
    if _INCLUDE not in text:
        raise RuntimeError(f"{family}.cu does not include {_COMMON}")
    # #line directives keep compiler messages pointing at the real file and line.
    common = (_DIR / _COMMON).read_text().rstrip("\n") + "\n"
    before, after = text.split(_INCLUDE, 1)
    resume = before.count("\n") + 2  # the line after the #include
    return f'{before}#line 1 "{_COMMON}"\n{common}#line {resume} "{family}.cu"{after}'


def nvrtc_options(*, half_headers=True):
    """NVRTC options ember compiles every family with (CuPy adds ``-arch`` for
    the current device). ``half_headers=False`` selects the built-in float16 /
    bfloat16 fallback for toolkits whose NVRTC cannot find cuda_fp16.h."""
    opts = ["-std=c++17"]
    if not half_headers:
        opts.append("-DEMBER_NO_HALF_HEADERS")
    return tuple(opts)


_UNARY = ("neg", "abs", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "gelu",
          "gelu_tanh", "silu")
_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "pow")

#: (source, destination) suffixes of elementwise.cu's contiguous cast kernels
#: (float64 -> 16-bit is not among them: through float it would round twice).
CASTS = (("f32", "f64"), ("f32", "f16"), ("f32", "bf16"), ("f64", "f32"),
         ("f16", "f32"), ("f16", "f64"), ("f16", "bf16"),
         ("bf16", "f32"), ("bf16", "f64"), ("bf16", "f16"))


def _per_dtype(stems, dtypes=_ALL, variants=("",)):
    return [f"ember_{s}_{d}{v}" for s in stems for d in dtypes for v in variants]


def kernel_names(family):
    """Every ``extern "C"`` kernel that ``family``'s file defines (the test
    checks this list against the compiled PTX, both ways)."""
    if family == "elementwise":
        return (_per_dtype(_UNARY, variants=("_contig", "_strided"))
                + _per_dtype(_BINARY, variants=("_contig", "_strided", "_scalar"))
                + [f"ember_cast_{s}_{d}" for s, d in CASTS])
    if family == "reduce":
        return (_per_dtype(("sum", "mean", "max", "min"),
                           variants=("_inner", "_outer", "_full_pass1", "_full_pass2"))
                + _per_dtype(("argmax", "argmin"), variants=("_inner", "_outer")))
    if family == "softmax":
        return _per_dtype(("softmax", "log_softmax", "softmax_backward", "log_softmax_backward",
                           "cross_entropy_fwd", "cross_entropy_bwd"))
    if family == "norm":
        return (_per_dtype(("layer_norm_fwd", "layer_norm_bwd_input", "layer_norm_bwd_params",
                            "batch_norm_stats", "batch_norm_stats_partial",
                            "batch_norm_stats_finish", "batch_norm_apply", "batch_norm_bwd_reduce",
                            "batch_norm_bwd_reduce_partial", "batch_norm_bwd_reduce_finish",
                            "batch_norm_bwd_input"))
                + _per_dtype(("batch_norm_apply", "batch_norm_bwd_reduce",
                              "batch_norm_bwd_reduce_finish", "batch_norm_bwd_input"),
                             dtypes=("f16", "bf16"), variants=("_p32",))
                + _per_dtype(("batch_norm_update_running_f32", "batch_norm_update_running_f64")))
    if family == "index":
        return _per_dtype(("gather", "index_select", "embedding_fwd", "scatter_add", "index_add",
                           "index_add_sorted", "index_put"))
    if family == "random":
        return (_per_dtype(("uniform", "normal"), dtypes=("f32", "f64"))
                + _per_dtype(("dropout", "dropout_backward")))
    if family == "optim":
        return (_per_dtype(("multi_sgd", "multi_adam", "multi_unscale"))
                + ["ember_multi_step_bump", "ember_amp_update_scale"])
    if family == "pool_conv":
        return _per_dtype(("im2col", "col2im", "max_pool2d_fwd", "max_pool2d_bwd",
                           "avg_pool2d_fwd", "avg_pool2d_bwd"))
    if family == "attention":
        flash = ("f32", "f16", "bf16")
        return (_per_dtype(("flash_fwd", "flash_bwd"), dtypes=flash, variants=("_d64", "_d128"))
                + _per_dtype(("flash_bwd_delta",), dtypes=flash))
    raise ValueError(f"unknown CUDA kernel family {family!r}; expected one of {FAMILIES}")
