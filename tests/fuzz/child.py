"""Runs fuzz calls in a child process: ``python child.py CALLS.json FIRST PROTOCOL_FD``.

Before each call it writes ``S i`` to the protocol descriptor and after it
``E i outcome`` (``ok``, ``exc:TypeName``, ``oob:what``, or ``lenient:TypeName``
when NumPy raises on the same call where ember succeeded), so the parent knows
which call was running when the process died (a crash) or stopped answering (a
hang).  The call's own prints go to /dev/null.
"""
import faulthandler
import json
import os
import re
import signal
import sys
import warnings

# the repository root, so that the call sources can import tests.fuzz.values; appended,
# so that the installed ember comes first (the root also holds the source folder ember/)
sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


_TORCH_ONLY = ("dim=", "keepdim=", "device=", "requires_grad=", "descending=", "stable=",
               "correction=", "inplace=", "training=", "'bfloat16'", "as_tuple=", "dims=",
               "other=", "unbiased=", "dim0=", "dim1=", "steps=")

_REDUCTIONS = ("sum", "prod", "mean", "std", "var", "min", "max", "amin", "amax", "all", "any",
               "nansum", "nanprod", "nanmean", "nanstd", "nanvar", "nanmin", "nanmax", "argmin",
               "argmax", "count_nonzero", "median", "nanmedian", "ptp")



def _reduces_0d(target, source):
    """A reduction of a 0-d array or a Python scalar along axis 0 or -1 (as near as the
    call's source tells)."""
    if target.split(".")[-1] not in _REDUCTIONS:
        return False
    if target.startswith("ndarray."):
        return "A((), " in source and re.search(r"\.\w+\((axis=)?(0|-1)\b", source) is not None
    scalar = re.search(r"ember\.\w+\(-?[\d.*]+, ", source) is not None
    return (scalar or "A((), " in source) and \
        re.search(r"ember\.\w+\((-?[\d.*]+|a\d+), (axis=)?(0|-1)\b", source) is not None


# Where ember accepts on purpose what NumPy refuses, the call is not held to NumPy:
# (reason, test on (target, source)).  Everything else that NumPy refuses, ember must too.
DELIBERATE = (
    ("PyTorch's keywords and dtypes", lambda t, s: any(k in s for k in _TORCH_ONLY)),
    ("dtype on every ember.random sampler, by keyword or (as Generator's) after size (the "
     "float32 default needs a way to float64, as NumPy's Generator and PyTorch have)",
     lambda t, s: t.startswith("ember.random.")
     and ("dtype=" in s or re.search(r", (np\.(float|int|uint)\w*|'(float|int|uint)\w*')\)",
                                     s) is not None)),
    ("tri/triu/tril_indices read n, k and m as Python integers (NumPy's arithmetic on a 0-d "
     "unsigned array wraps below zero and refuses)",
     lambda t, s: t in ("ember.triu_indices", "ember.tril_indices", "ember.tri")
     and "'uint" in s),
    ("the Array API: iinfo/finfo of an array, expand_dims' default axis, fftfreq's dtype=",
     lambda t, s: t in ("ember.iinfo", "ember.finfo", "ember.expand_dims", "ember.fft.fftfreq",
                        "ember.fft.rfftfreq")),
    ("the Array API: a bytes object is a buffer (uint8), as in asarray", lambda t, s: "b'x'" in s),
    ("linalg in float16 computes in float32 (PyTorch's CPU refuses, NumPy refuses; the "
     "answer is correct)", lambda t, s: t.startswith("ember.linalg.") and "'float16'" in s),
    ("PyTorch's linalg signatures: matrix_rank(atol=, rtol=), matmul(out=), vector_norm's "
     "and matrix_norm's positional ord",
     lambda t, s: t in ("ember.linalg.matrix_rank", "ember.linalg.matmul",
                        "ember.linalg.vector_norm", "ember.linalg.matrix_norm")),
    ("PyTorch's reductions of a 0-d array (or a scalar) take axis 0 or -1 and reduce nothing",
     lambda t, s: _reduces_0d(t, s)),
    ("ndarray.all/any's positional arguments are (axis, out, keepdims), as NumPy documents "
     "(NumPy's method passes them on as (axis, dtype, out))", lambda t, s: t in ("ndarray.all", "ndarray.any")
     and re.search(r"\.(all|any)\(([^,()=]+|\([^)]*\)), ([^,()=]+|\([^)]*\))[,)]", s)
     is not None),
    ("PyTorch's squeeze takes a list of dims", lambda t, s: t in ("ember.squeeze",
                                                                   "ndarray.squeeze")
     and re.search(r"squeeze\((a\d+, )?(axis=|dim=)?\[", s) is not None),
    ("PyTorch's sizes and dims as lists: randn([2, 3]), sum(x, axis=[0, 1])",
     lambda t, s: (t.startswith("ember.random.") and "([" in s)
     or any(k + "[" in s for k in ("axis=", "dim="))
     or t.split(".")[-1] in ("prod", "sum", "min", "max", "mean", "std", "var", "amax", "amin",
                             "all", "any") and "[" in s.split("R = ", 1)[-1]),
    ("the Array API's clip: one bound may be given alone (positionally too), and a bool array "
     "with no bounds comes back as a copy", lambda t, s: t in ("ember.clip", "ndarray.clip")),
    ("NEP 50 everywhere: a Python scalar is weak in dot as in the ufuncs, and a Python int "
     "beyond int64 meets a float array as a float", lambda t, s: t in ("ember.dot",
     "ember.logical_and", "ember.logical_or", "ember.logical_xor") and "**" in s or
     t == "ember.dot" and re.search(r"[(,] ?-?[\d.]+j?[,)]", s) is not None),
    ("round of bool and integer arrays with decimals >= 0 is an exact copy (documented in "
     "ember.round)", lambda t, s: t in ("ember.round", "ndarray.round", "ember.around")
     and ("'bool'" in s or "'int" in s or "'uint" in s
          or re.search(r"round\((True|False|-?\d+)[,)]", s) is not None)),
    ("where=None means no mask in ember's reductions", lambda t, s: "where=None" in s),
    ("PyTorch's squeeze of a 0-d array takes dims 0/-1 and lists of them",
     lambda t, s: t in ("ember.squeeze", "ndarray.squeeze") and ("A((), " in s or "A(" not in s)),
    ("ember.fft's n-d transforms take one int as s= or axes=, as scipy.fft's do (ember is "
     "a SciPy array backend; tests/core/test_fft.py::test_nd_sequences)",
     lambda t, s: t.startswith("ember.fft.") and t[-1] in "2n"
     and re.search(r"(\(a\d+, |\bs=|\baxes=)-?\d+[,)]", s) is not None),
    ("std with an integer dtype= gives that dtype for every result shape (NumPy refuses "
     "only when the result is an array: its sqrt's out= cast)",
     lambda t, s: t.split(".")[-1] in ("std", "nanstd") and "dtype='int" in s
     or "dtype='uint" in s and t.split(".")[-1] in ("std", "nanstd")),
    ("PyTorch's diff: prepend/append=None are left out",
     lambda t, s: t == "ember.diff" and ("pend=None" in s or ", None" in s)),
    ("random.seed takes PyTorch's 64-bit seeds (DataLoader workers seed with them)",
     lambda t, s: t == "ember.random.seed"),
    ("conj of a real array is a copy of it (NumPy turns bool into int8)",
     lambda t, s: t in ("ember.conj", "ember.conjugate", "ndarray.conj", "ndarray.conjugate")
     and "'bool'" in s),
    ("ember.sort/argsort of a 0-d array returns it, as PyTorch's do (NumPy: AxisError)",
     lambda t, s: t in ("ember.sort", "ember.argsort") and ("A((), " in s or "A(" not in s)),
    ("PyTorch's fftshift/ifftshift return a 0-d array as it is (NumPy's fail in roll)",
     lambda t, s: t in ("ember.fft.fftshift", "ember.fft.ifftshift")),
    ("PyTorch's x.min(other) / x.max(other): elementwise with an array argument",
     lambda t, s: t in ("ndarray.min", "ndarray.max", "ember.min", "ember.max")),
    ("PyTorch's rule: axis 0 or -1 of a 0-d array reduces nothing (NumPy: AxisError)",
     lambda t, s: t.split(".")[-1] in ("var", "std", "mean", "sum", "prod")
     and ("axis=0" in s or "axis=-1" in s)),
)


# NumPy calls that may never return (in C, where the twin's alarm cannot stop them): the
# twin does not run them
_NO_TWIN = {"ember.random.zipf": "NumPy's zipf loops forever for a > 1024",
            "ember.random.vonmises": "NumPy's vonmises loops forever for kappa ~ 1e17+",
            "ember.random.Generator.zipf": "NumPy's zipf loops forever for a > 1024"}


def deliberate(target, source):
    """The reason ember accepts this call on purpose where NumPy raises, or None."""
    for reason, applies in DELIBERATE:
        if applies(target, source):
            return reason
    return None


class _NumPyAsEmber:
    """`ember` in a call's source, answered by NumPy (ember.linalg -> numpy.linalg)."""
    def __getattr__(self, name):
        import numpy
        return getattr(numpy, name)


def _numpy_counterpart(target):
    import numpy
    head, _, name = target.rpartition(".")
    owner = {"ember": numpy, "ember.linalg": numpy.linalg, "ndarray": numpy.ndarray}.get(head)
    if owner is None and head.startswith("ember.") and head.count(".") == 1:   # ufunc methods
        owner = getattr(numpy, head.split(".")[1], None)
    return owner is not None and hasattr(owner, name)


def _against_numpy(target, source, ns0):
    """The same call on NumPy arrays of the same values: 'lenient:Exc: message' when
    NumPy raises where ember succeeded (a silent success), unless ember accepts the
    call on purpose (DELIBERATE)."""
    if deliberate(target, source) or target in _NO_TWIN or (
            target.split(".")[-1] in ("put", "take") and "mode='wrap'" in source):
        return "ok"     # (NumPy's wrap mode subtracts in C: 10**18 never returns)
    from tests.fuzz import values
    ns = dict(ns0, ember=_NumPyAsEmber(),
              A=lambda *a, **k: values.np.asarray(values.A(*a, **k)).copy())
    def too_slow(*_):
        raise _TwinTimeout()
    old = signal.signal(signal.SIGALRM, too_slow)
    signal.setitimer(signal.ITIMER_REAL, 2.0)       # NumPy itself may loop (diff(n=10**12))
    try:
        exec(compile(source, "<numpy twin>", "exec"), ns)     # noqa: S102
        return "ok"
    except _TwinTimeout:
        return "ok"
    except BaseException as exc:    # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        message = " ".join(str(exc).split())[:200]
        return f"lenient:{type(exc).__name__}: {message}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        values.reset()


class _TwinTimeout(BaseException):
    pass


def main():
    calls_path, first, fd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    proto = os.fdopen(fd, "w", buffering=1)
    faulthandler.enable(sys.stderr)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(os.devnull, "w")
    warnings.simplefilter("ignore")
    from tests.fuzz import values
    ns0 = {name: getattr(values, name) for name in values.__all__}
    with open(calls_path) as f:
        calls = json.load(f)
    proto.write("R\n")                 # ready: imports done
    for i, _target, source in calls[first:]:
        proto.write(f"S {i}\n")
        ns = dict(ns0)
        try:
            code = compile(source, f"<fuzz call {i}>", "exec")
            exec(code, ns)             # noqa: S102 -- our own generated source
            values.touch(ns.get("R"))
            outcome = "ok"
        except BaseException as exc:   # noqa: BLE001 -- an exception is a fine answer
            if isinstance(exc, KeyboardInterrupt):
                raise
            outcome = "exc:" + type(exc).__name__
        ns = None
        oob = values.check_guards()
        if oob:
            outcome = "oob:" + oob
        values.reset()
        if outcome == "ok" and _numpy_counterpart(_target):
            outcome = _against_numpy(_target, source, ns0)
        proto.write(f"E {i} {outcome}\n")
    proto.write("D\n")


if __name__ == "__main__":
    main()
