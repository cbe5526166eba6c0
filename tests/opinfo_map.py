"""Which of PyTorch's OpInfo entries (``op_db``) have an ember counterpart of the same
meaning, how their arguments translate, and the one table of deliberate differences.

Used by tests/conformance/test_opinfo.py.  An entry of ``OPS`` maps an OpInfo name (``name`` or
``name.variant``) to a ``Spec``: the ember function (a dotted path under ``ember``, or a
callable taking the converted sample), how PyTorch's keywords are spelled in ember, and
optionally a post-processing of both sides' outputs where an output is defined only up
to sign (eigenvectors, singular vectors).  Nothing is skipped outside ``DIFFERENCES``.
"""
import torch

import ember as E

# PyTorch keyword -> NumPy keyword, for the NumPy-named functions
NP_KW = {"dim": "axis", "keepdim": "keepdims"}


class Spec:
    """fn: dotted path under ember or a callable(*args, **kwargs) on ember values.
    kw: PyTorch keyword -> ember keyword (None: drop it); defaults: keywords ember needs
    spelled out where PyTorch's default differs; post: applied to the outputs of both
    sides (torch tensors and ember arrays alike: only methods both have); tol: (rtol,
    atol) for the float32 forward; grad: whether to compare float64 gradients."""

    def __init__(self, fn, kw=None, defaults=None, post=None, tol=None, grad=True):
        self.fn, self.kw, self.defaults = fn, dict(kw or {}), dict(defaults or {})
        self.post, self.tol, self.grad = post, tol, grad

    def resolve(self):
        if callable(self.fn):
            return self.fn
        obj = E
        for part in self.fn.split("."):
            obj = getattr(obj, part)
        return obj


def np_spec(name, **kw):
    """A NumPy-named function: dim/keepdim become axis/keepdims."""
    m = dict(NP_KW)
    m.update(kw.pop("kw", {}))
    return Spec(name, kw=m, **kw)


def _abs_vecs(out):
    # eigh: eigenvectors are defined up to sign (OpInfo compares |V|)
    return out[0], abs(out[1])


def _abs_svd(out):
    # singular vectors: up to sign; with full_matrices, the vectors past min(m, n) span
    # the null space in no particular basis (OpInfo compares them the same way)
    k = out[1].shape[-1]
    return abs(out[0][..., :k]), out[1], abs(out[2][..., :k, :])


def _where(x, cond, other):
    return E.where(cond, x, other)


def _std_var(name):
    # torch's std/var default to the unbiased estimate (correction=1); NumPy's to ddof=0
    def f(x, *args, dim=None, unbiased=None, correction=None, keepdim=False):
        if args:                                   # std(x, unbiased)
            (unbiased,) = args
        if correction is None:
            correction = 1 if unbiased is None or unbiased else 0
        return getattr(E, name)(x, axis=dim, correction=correction, keepdims=keepdim)
    return f


def _meshgrid(*xs, indexing="ij"):
    return E.meshgrid(*xs, indexing=indexing)


def _meshgrid_list(xs, indexing="ij"):
    return E.meshgrid(*xs, indexing=indexing)


def _clamp(x, min=None, max=None):
    return E.clip(x, min, max)


def _quantile(name):
    def f(x, q, dim=None, keepdim=False, *, interpolation="linear"):
        return getattr(E, name)(x, q, axis=dim, keepdims=keepdim, method=interpolation)
    return f


def _pinv_singular(a, b):
    return E.linalg.pinv(E.matmul(a, E.matrix_transpose(b)))


def _lstsq_solution(out):
    return out[0]


def _cumulative(name):
    def f(x, dim, *, dtype=None):
        return getattr(E, name)(x, axis=dim, dtype=dtype)
    return f


def _argsort(x, dim=-1, descending=False, *, stable=False):
    return E.argsort(x, axis=dim, descending=descending, stable=stable)


def _atleast(name):
    def f(x):        # torch also takes one list of tensors; NumPy's take them as arguments
        fn = getattr(E, name)
        return fn(*x) if isinstance(x, (list, tuple)) else fn(x)
    return f


def _einsum(tensors, equation):
    return E.einsum(equation, *tensors)


def _index_select(x, dim, index):
    return E.take(x, index, axis=dim)


def _repeat_interleave(x, repeats=None, dim=None, *, output_size=None):
    return E.repeat(x, repeats, axis=dim)


def _diff(x, n=1, dim=-1, prepend=None, append=None):
    kw = {}
    if prepend is not None:
        kw["prepend"] = prepend
    if append is not None:
        kw["append"] = append
    return E.diff(x, n, axis=dim, **kw)


OPS = {
    # ------------------------------------------------------------ elementwise, unary
    "abs": Spec("absolute"), "acos": Spec("arccos"), "acosh": Spec("arccosh"),
    "asin": Spec("arcsin"), "asinh": Spec("arcsinh"), "atan": Spec("arctan"),
    "atanh": Spec("arctanh"), "ceil": Spec("ceil"), "cos": Spec("cos"), "cosh": Spec("cosh"),
    "deg2rad": Spec("deg2rad"), "exp": Spec("exp"), "exp2": Spec("exp2"),
    "expm1": Spec("expm1"), "floor": Spec("floor"), "log": Spec("log"),
    "log10": Spec("log10"), "log1p": Spec("log1p"), "log2": Spec("log2"),
    "neg": Spec("negative"), "positive": Spec("positive"), "rad2deg": Spec("rad2deg"),
    "reciprocal": Spec("reciprocal"), "round": Spec("round"),
    "round.decimals_0": Spec("round"), "round.decimals_3": Spec("round"),
    "round.decimals_neg_3": Spec("round"), "sign": Spec("sign"), "signbit": Spec("signbit"),
    "sin": Spec("sin"), "sinc": Spec("sinc"), "sinh": Spec("sinh"), "sqrt": Spec("sqrt"),
    "square": Spec("square"), "tan": Spec("tan"), "tanh": Spec("tanh"),
    "trunc": Spec("trunc"), "isfinite": Spec("isfinite"), "isinf": Spec("isinf"),
    "isnan": Spec("isnan"), "isneginf": Spec("isneginf"), "isposinf": Spec("isposinf"),
    "isreal": Spec("isreal"), "nan_to_num": Spec("nan_to_num"), "i0": Spec("i0"),
    "angle": Spec("angle"), "real": Spec("real"), "imag": Spec("imag"), "conj": Spec("conj"),
    "frexp": Spec("frexp"), "bitwise_not": Spec("invert"),
    # ------------------------------------------------------------ elementwise, binary
    "add": Spec("add"), "sub": Spec("subtract"), "mul": Spec("multiply"),
    "div.no_rounding_mode": Spec("divide"), "true_divide": Spec("true_divide"),
    "floor_divide": Spec("floor_divide"), "remainder": Spec("remainder"), "fmod": Spec("fmod"),
    "pow": Spec("power"), "float_power": Spec("float_power"), "atan2": Spec("arctan2"),
    "hypot": Spec("hypot"), "copysign": Spec("copysign"), "nextafter": Spec("nextafter"),
    "maximum": Spec("maximum"), "minimum": Spec("minimum"), "fmax": Spec("fmax"),
    "fmin": Spec("fmin"), "max.binary": Spec("maximum"), "min.binary": Spec("minimum"),
    "logaddexp": Spec("logaddexp"), "logaddexp2": Spec("logaddexp2"), "eq": Spec("equal"),
    "ne": Spec("not_equal"), "lt": Spec("less"), "le": Spec("less_equal"),
    "gt": Spec("greater"), "ge": Spec("greater_equal"), "logical_and": Spec("logical_and"),
    "logical_or": Spec("logical_or"), "logical_xor": Spec("logical_xor"),
    "logical_not": Spec("logical_not"), "bitwise_and": Spec("bitwise_and"),
    "bitwise_or": Spec("bitwise_or"), "bitwise_xor": Spec("bitwise_xor"),
    "bitwise_left_shift": Spec("left_shift"), "bitwise_right_shift": Spec("right_shift"),
    "gcd": Spec("gcd"), "lcm": Spec("lcm"), "ldexp": Spec("ldexp"),
    "heaviside": Spec("heaviside"), "isclose": Spec("isclose"), "allclose": Spec("allclose"),
    "equal": Spec("array_equal"), "clamp": Spec(_clamp), "where": Spec(_where),
    # ------------------------------------------------------------ reductions, scans
    "sum": np_spec("sum"), "prod": np_spec("prod"), "mean": np_spec("mean"),
    "nansum": np_spec("nansum"), "nanmean": np_spec("nanmean"), "amax": np_spec("amax"),
    "amin": np_spec("amin"), "max.reduction_no_dim": np_spec("max"),
    "min.reduction_no_dim": np_spec("min"), "argmax": np_spec("argmax"),
    "argmin": np_spec("argmin"), "all": np_spec("all"), "any": np_spec("any"),
    "count_nonzero": np_spec("count_nonzero"), "logsumexp": np_spec("logsumexp"),
    "std": Spec(_std_var("std")), "var": Spec(_std_var("var")),
    "std.unbiased": Spec(_std_var("std")), "var.unbiased": Spec(_std_var("var")),
    "cumsum": Spec(_cumulative("cumsum")), "cumprod": Spec(_cumulative("cumprod")),
    "diff": Spec(_diff),
    "quantile": Spec(_quantile("quantile")), "nanquantile": Spec(_quantile("nanquantile")),
    "argsort": Spec(_argsort), "msort": Spec(lambda x: E.sort(x, axis=0)),
    # ------------------------------------------------------------ shape and indexing
    "reshape": Spec("reshape"), "ravel": Spec("ravel"), "flip": np_spec("flip", kw={"dims": "axis"}),
    "fliplr": Spec("fliplr"), "flipud": Spec("flipud"),
    "roll": np_spec("roll", kw={"shifts": "shift", "dims": "axis"}),
    "rot90": np_spec("rot90", kw={"dims": "axes"}), "squeeze": np_spec("squeeze"),
    "squeeze.multiple": np_spec("squeeze"), "unsqueeze": np_spec("expand_dims"),
    "transpose": Spec("swapaxes"), "permute": Spec("permute_dims"), "movedim": Spec("moveaxis"),
    "mT": Spec("matrix_transpose"), "tile": Spec("tile"),
    "repeat_interleave": Spec(_repeat_interleave), "broadcast_to": Spec("broadcast_to"),
    "broadcast_tensors": Spec("broadcast_arrays"), "broadcast_shapes": Spec("broadcast_shapes"),
    "cat": np_spec("concatenate"), "stack": np_spec("stack"), "hstack": Spec("hstack"),
    "vstack": Spec("vstack"), "dstack": Spec("dstack"), "column_stack": Spec("column_stack"),
    "atleast_1d": Spec(_atleast("atleast_1d")),
    "atleast_2d": Spec(_atleast("atleast_2d")), "atleast_3d": Spec(_atleast("atleast_3d")), "tensor_split": np_spec("array_split"),
    "hsplit": Spec("hsplit"), "vsplit": Spec("vsplit"), "dsplit": Spec("dsplit"),
    "diag": Spec("diag", kw={"diagonal": "k"}), "diagonal": Spec("diagonal", kw={"dim1": "axis1", "dim2": "axis2"}),
    "tril": Spec("tril", kw={"diagonal": "k"}), "triu": Spec("triu", kw={"diagonal": "k"}),
    "trace": Spec("trace"), "kron": Spec("kron"), "outer": Spec("outer"), "inner": Spec("inner"),
    "dot": Spec("dot"), "vdot": Spec("vdot"), "matmul": Spec("matmul"), "mm": Spec("matmul"),
    "mv": Spec("matmul"), "bmm": Spec("matmul"), "tensordot": Spec("tensordot", kw={"dims": "axes"}),
    "einsum": Spec(_einsum), "take": Spec("take"),
    "take_along_dim": np_spec("take_along_axis"), "index_select": Spec(_index_select),
    "argwhere": Spec("argwhere"), "meshgrid.variadic_tensors": Spec(_meshgrid),
    "meshgrid.list_of_tensors": Spec(_meshgrid_list), "unravel_index": Spec("unravel_index"),
    "bincount": Spec("bincount"), "isin": Spec("isin"), "clone": Spec("copy"), "contiguous": Spec("ascontiguousarray"),
    "zeros_like": Spec("zeros_like"), "ones_like": Spec("ones_like"),
    "full_like": Spec("full_like"),
    # ------------------------------------------------------------ linear algebra
    "linalg.cholesky": Spec("linalg.cholesky"), "linalg.det": Spec("linalg.det"),
    "linalg.slogdet": Spec("linalg.slogdet"),
    "linalg.inv": Spec("linalg.inv"), "linalg.solve": Spec("linalg.solve"),
    "linalg.eigh": Spec("linalg.eigh", post=_abs_vecs), "linalg.eigvalsh": Spec("linalg.eigvalsh"),
    "linalg.svd": Spec("linalg.svd", post=_abs_svd), "linalg.svdvals": Spec("linalg.svdvals"),
    "linalg.qr": Spec("linalg.qr"), "linalg.matrix_rank": Spec("linalg.matrix_rank"),
    "linalg.matrix_power": Spec("linalg.matrix_power"), "linalg.multi_dot": Spec("linalg.multi_dot"),
    "linalg.norm": Spec("linalg.norm", kw=NP_KW), "linalg.vector_norm": Spec("linalg.vector_norm"),
    "linalg.matrix_norm": Spec("linalg.matrix_norm"), "linalg.pinv": Spec("linalg.pinv"),
    "linalg.pinv.hermitian": Spec("linalg.pinv"), "linalg.pinv.singular": Spec(_pinv_singular),
    "pinverse": Spec("linalg.pinv"),
    "linalg.lstsq": Spec("linalg.lstsq", kw={"driver": None}, post=_lstsq_solution), "linalg.cond": Spec("linalg.cond"),
    "linalg.diagonal": Spec("linalg.diagonal"), "linalg.vecdot": np_spec("linalg.vecdot"),
    "linalg.cross": Spec("linalg.cross"),
}

# nn.functional ops: ember.nn.functional follows PyTorch's API, names and keywords as they are
NN_FUNCTIONAL = [
    "relu", "relu6", "elu", "selu", "celu", "gelu", "silu", "mish", "softplus", "softsign",
    "tanhshrink", "hardtanh", "hardsigmoid", "hardswish", "leaky_relu", "logsigmoid", "glu",
    "threshold", "prelu", "softmin", "layer_norm", "group_norm", "batch_norm", "instance_norm",
    "normalize", "linear", "bilinear", "conv1d", "conv2d", "conv_transpose1d",
    "conv_transpose2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "one_hot", "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss",
    "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
    "scaled_dot_product_attention",
]
for _n in NN_FUNCTIONAL:
    OPS["nn.functional." + _n] = Spec("nn.functional." + _n.split(".")[0])
OPS["nn.functional.scaled_dot_product_attention"].tol = (1e-4, 1e-5)   # float32 softmax
OPS["nn.functional.embedding"] = Spec(lambda w, idx, **kw: E.nn.functional.embedding(idx, w, **kw))
OPS["softmax"] = Spec("nn.functional.softmax")
OPS["log_softmax"] = Spec("nn.functional.log_softmax")


def _kw(s, *names):
    return any(k in s.kwargs for k in names)


def _ndim0(s):
    return getattr(s.input, "ndim", None) == 0


# The one table of deliberate differences: (OpInfo name, which samples, reason).  The
# predicate takes the OpInfo SampleInput (torch values); "forward"/"grad"/"both" says
# which comparison it excuses.  Every skipped sample is counted and reported.
def _axis_on_0d(s):
    return _ndim0(s) and (_kw(s, "dim") and s.kwargs["dim"] not in (None, ())
                          or any(isinstance(a, int) for a in s.args))


def _squeezes_a_long_axis(s):
    dims = s.args[0] if s.args else s.kwargs.get("dim")
    if dims is None:
        return False
    dims = dims if isinstance(dims, (list, tuple)) else [dims]
    return any(s.input.ndim and s.input.shape[d] != 1 for d in dims) or \
        (s.input.ndim == 0 and len(dims) > 0)


def _contracts_unequal_lengths(s):
    a, b = s.input, s.args[0]
    dims = s.kwargs.get("dims", s.args[1] if len(s.args) > 1 else 2)
    if isinstance(dims, int):
        pa, pb = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        pa, pb = dims
    return any(a.shape[i] != b.shape[j] for i, j in zip(pa, pb))


_AXIS_0D = "an axis on a 0-d array is an error in NumPy (PyTorch treats 0-d as 1-d there)"
DIFFERENCES = [
    ("add", lambda s: _kw(s, "alpha"), "alpha= is PyTorch's own (NumPy's add has no scale)",
     "both"),
    ("sub", lambda s: _kw(s, "alpha"), "alpha= is PyTorch's own (NumPy's subtract has no "
     "scale)", "both"),
    ("ldexp", lambda s: True, "NumPy's ldexp needs an integer exponent; PyTorch's takes floats",
     "both"),
    ("contiguous", _ndim0, "NumPy's ascontiguousarray gives a 0-d input shape (1,); "
     "PyTorch's contiguous keeps it 0-d", "both"),
] + [(op, _axis_on_0d, _AXIS_0D, "both") for op in (
    "sum", "prod", "mean", "nansum", "nanmean", "amax", "amin", "all", "any", "count_nonzero",
    "logsumexp", "argmax", "argmin", "cumsum", "cumprod", "quantile", "nanquantile",
    "transpose", "index_select", "linalg.vector_norm", "std", "var", "argsort")] + [
    ("nn.functional.normalize", _ndim0, _AXIS_0D, "both"),
    ("squeeze", _squeezes_a_long_axis, "NumPy's squeeze of an axis whose length is not 1 is "
     "an error; PyTorch leaves it", "both"),
    ("squeeze.multiple", _squeezes_a_long_axis, "NumPy's squeeze of an axis whose length is "
     "not 1 is an error; PyTorch leaves it", "both"),
    ("cat", lambda s: any(t.shape == (0,) for t in s.input) and
     any(t.ndim != 1 for t in s.input), "PyTorch's legacy rule lets a 1-d empty tensor join "
     "arrays of any rank; NumPy requires equal ranks", "both"),
    ("linalg.lstsq", lambda s: s.input.ndim != 2, "NumPy's lstsq solves one system (a 2-d "
     "matrix); PyTorch's batches", "both"),
    ("tensordot", _contracts_unequal_lengths, "PyTorch broadcasts contracted axes of length 1; "
     "NumPy requires equal lengths", "both"),
    ("take_along_dim", lambda s: not s.args[1:] and "dim" not in s.kwargs,
     "without an axis PyTorch flattens the indices too; NumPy requires 1-d indices", "both"),
    ("linalg.solve", lambda s: s.input.ndim >= 3 and s.args[0].ndim == s.input.ndim - 1,
     "a batched right-hand side of shape (..., n) is a stack of vectors in PyTorch; in "
     "NumPy 2 and the Array API only a 1-d right-hand side is a vector", "both"),
    ("tensor_split", lambda s: isinstance(s.args[0], torch.Tensor),
     "split points given as an array: the backward needs them as ints (ember's graph does "
     "not keep the arguments of split alive) and says so", "grad"),
    ("clamp", lambda s: any(isinstance(a, torch.Tensor) and not a.is_floating_point()
                            for a in s.args), "NumPy 2 promotes float32 with an int32 array "
     "to float64; PyTorch keeps float32 (dtype categories)", "forward"),
    ("nn.functional.scaled_dot_product_attention", lambda s: s.kwargs.get("dropout_p", 0) > 0,
     "dropout draws random numbers: no two libraries agree on them", "both"),
    ("nn.functional.batch_norm", lambda s: s.input.ndim < 2,
     "ember's batch_norm takes (N, C, ...) as the BatchNorm modules do; PyTorch's functional "
     "form also takes a 1-d (C,) input", "both"),
]
