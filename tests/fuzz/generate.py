"""The fuzz calls: every public callable, each called with adversarial arguments.

A call is ``(target, source)``: `source` is Python that defines its argument arrays
with ``A(...)`` (tests/fuzz/values.py) and then makes the call as ``R = ...``, so
the source itself is the reproducer.  Call number i of seed s depends on (s, i)
only, so any call of a campaign can be regenerated on its own.
"""
import inspect
import random
import types

import ember

# callables that write files, change process-wide state, or start processes
EXCLUDED = {
    "ember.save", "ember.load", "ember.set_default_dtype", "ember.set_printoptions",
    "ember.printoptions", "ember.seterr", "ember.errstate", "ember.show_config",
    "ember.set_grad_enabled", "ember.use_deterministic_algorithms",
}

SHAPES = [(), (0,), (1,), (3,), (2, 3), (0, 3), (3, 0), (1, 1, 1), (2, 3, 4), (2, 1, 3), (4, 4)]
LAYOUTS = ["c", "c", "neg", "step", "T", "bcast"]
DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "bfloat16", "float32", "float32", "float64", "float64", "complex64",
          "complex128"]
FILLS = ["rand", "rand", "special", "zero"]

SCALARS = [
    "None", "0", "1", "-1", "2", "3", "-7", "2**31", "2**63", "-2**63-1", "2**64", "10**12",
    "10**18", "0.5", "-1.5", "float('nan')", "float('inf')", "-float('inf')", "1e308",
    "True", "False", "1j", "'abc'", "''", "b'x'", "object()", "[]", "[[]]", "[1, 2, 3]",
    "[[1, 2], [3]]", "[1.5, None]", "()", "(0,)", "(-1,)", "(2, -3)", "(2**40, 2**40)",
    "(10**12,)", "(2**62, 4)", "(10**12, 10**12)", "(1,)*40", "{}", "slice(None)",
    "slice(None, None, -1)", "...", "'float32'", "ember.int8", "ember.complex128",
    "'nonsense'", "np.float64", "lambda *a: 0", "range(3)", "np.ones(3)", "np.float32(1.5)",
    "np.array(2**62)", "[0, 0]", "[-1, 5]", "[True, False, True]", "(1, 0)",
]
AXES = ["None", "0", "1", "-1", "2", "-33", "32", "2**63", "(0, 0)", "(0, 1)", "(-1, 0, 1)",
        "'0'", "1.0", "[0]", "()"]
KWARG_VALUES = {
    "axis": AXES, "dim": AXES, "axes": AXES, "axis1": AXES, "axis2": AXES, "source": AXES,
    "destination": AXES, "keepdims": ["True", "None", "2"], "keepdim": ["True"],
    "dtype": ["'float32'", "'int8'", "'bool'", "'complex64'", "'bfloat16'", "'uint64'",
              "'nonsense'", "np.float16", "int", "float", "complex", "object", "3", "None"],
    "ord": ["None", "1", "2", "-2", "0", "'fro'", "'nuc'", "float('inf')", "float('nan')",
            "'x'", "-float('inf')", "3.5"],
    "n": ["0", "1", "-1", "10**12", "None", "2.5"], "k": ["0", "1", "-1", "10**12", "2**63"],
    "shape": ["(0,)", "(-1,)", "(2**40, 2**40)", "(10**12,)", "(3,)", "()", "None", "(2, 3)"],
    "out": [],        # filled per call (aliases, wrong shapes)
    "copy": ["True", "False", "None"], "order": ["'C'", "'F'", "'K'", "'Z'"],
    "decimals": ["-400", "400", "0"], "ddof": ["-1", "10**12", "1.5"],
    "correction": ["-1", "10**12"], "repeats": ["-1", "10**12", "[1, 2]"],
    "reps": ["(10**9, 10**9)", "(-1,)", "()"], "offset": ["10**12", "-10**12", "0"],
    "q": ["-0.5", "1.5", "float('nan')", "[0.5]"], "p": ["-0.5", "1.5", "float('nan')"],
    "weight": [], "bias": [], "target": [], "input": [], "indices": [], "values": [],
    "mask": [], "where": [], "condition": [], "initial": ["None", "float('nan')", "2**63"],
    "rtol": [], "atol": [], "equal_nan": ["True"], "side": ["'left'", "'x'"],
    "descending": ["True"], "stable": ["True", "False"], "return_counts": ["True"],
    "return_inverse": ["True"], "return_index": ["True"], "reduction": ["'sum'", "'x'"],
    "training": ["True"], "inplace": ["True"], "stride": ["0", "-1", "(0, 0)", "10**12"],
    "padding": ["-1", "10**12", "'same'", "'x'"], "dilation": ["0", "-1"],
    "groups": ["0", "-1", "3"], "kernel_size": ["0", "-1", "10**12", "(2, 2)"],
    "num_classes": ["-1", "0", "10**12"], "ignore_index": ["-1", "10**12"],
    "eps": ["0", "-1", "float('nan')"], "momentum": ["float('nan')"], "device": ["'cpu'",
                                                                                 "'tpu'", "7"],
    "requires_grad": ["True"], "num": ["0", "-1", "10**12"], "endpoint": ["False"],
    "indexing": ["'ij'", "'xy'", "'x'"], "mode": ["'raise'", "'wrap'", "'clip'", "'x'"],
    "bins": ["0", "-1", "10**12", "[3, 1, 2]"], "weights": [], "kind": ["'stable'", "'x'"],
    "spacing": [], "upper": ["True"], "full_matrices": ["False"], "compute_uv": ["False"],
    "hermitian": ["True"], "rcond": ["-1", "float('nan')"],
}
_ARRAY_KW = {"weight", "bias", "target", "input", "indices", "values", "mask", "where",
             "condition", "rtol", "atol", "weights", "spacing"}


def _public(mod, prefix):
    """The public callables of `mod`: its ``__all__`` where it has one, else dir()."""
    out = []
    for name in sorted(getattr(mod, "__all__", None) or dir(mod)):
        if name.startswith("_"):
            continue
        try:
            obj = getattr(mod, name)
        except Exception:       # noqa: BLE001 -- a lazy attribute that fails is not ours to fuzz
            continue
        full = f"{prefix}.{name}"
        if full in EXCLUDED or isinstance(obj, (types.ModuleType, type)) or not callable(obj):
            continue
        out.append((full, obj))
    return out


def targets():
    """[(name, callable or None, kind)] of every public callable, in a fixed order."""
    import ember.nn.functional as F
    found = []
    for mod, prefix in ((ember, "ember"), (ember.linalg, "ember.linalg"),
                        (F, "ember.nn.functional"), (ember.random, "ember.random")):
        found += [(n, f, "function") for n, f in _public(mod, prefix)]
    fft = getattr(ember, "fft", None)
    if isinstance(fft, types.ModuleType):
        found += [(n, f, "function") for n, f in _public(fft, "ember.fft")]
    for name, f in _public(ember, "ember"):
        if isinstance(f, ember.ufunc):
            for meth in ("reduce", "accumulate", "outer", "at", "reduceat"):
                if hasattr(f, meth):
                    found.append((f"{name}.{meth}", getattr(f, meth), "ufunc method"))
    for meth in sorted(dir(ember.ndarray)):
        if meth.startswith("_") and meth not in ("__getitem__", "__setitem__", "__iadd__",
                                                 "__imul__", "__matmul__", "__pow__",
                                                 "__array__", "__dlpack__"):
            continue
        attr = getattr(ember.ndarray, meth, None)
        if callable(attr) and not isinstance(attr, type):
            found.append((f"ndarray.{meth}", attr, "method"))
    return found


def _signature(f):
    try:
        return inspect.signature(f)
    except (TypeError, ValueError):
        return None


def _array(rng, shape=None):
    shape = shape if shape is not None else rng.choice(SHAPES)
    return (f"A({shape!r}, {rng.choice(DTYPES)!r}, {rng.choice(LAYOUTS)!r}, "
            f"{rng.choice(FILLS)!r}, {rng.randrange(1000)})")


class _Call:
    def __init__(self, rng, tame):
        self.rng, self.lines, self.names = rng, [], []
        # a tame call uses arrays of one shape and dtype, to get past argument checks
        self.tame = (rng.choice(SHAPES[1:]), rng.choice(DTYPES)) if tame else None

    def new_array(self, shape=None):
        name = f"a{len(self.names)}"
        if self.tame and shape is None:
            src = (f"A({self.tame[0]!r}, {self.tame[1]!r}, {self.rng.choice(LAYOUTS)!r}, "
                   f"{self.rng.choice(FILLS)!r}, {self.rng.randrange(1000)})")
        else:
            src = _array(self.rng, shape)
        self.lines.append(f"{name} = {src}")
        self.names.append(name)
        return name

    def value(self):
        r = self.rng.random()
        if self.tame:
            return self.new_array() if r < 0.85 else self.rng.choice(SCALARS[:20])
        if r < 0.55:
            return self.new_array()
        if r < 0.65 and self.names:
            return self.rng.choice(self.names)          # aliasing: the same array again
        if r < 0.72:
            return "None"                               # the most common wrong argument
        return self.rng.choice(SCALARS)

    def out(self):
        rng = self.rng
        r = rng.random()
        if self.names and r < 0.35:
            return rng.choice(self.names)               # out= aliases an input
        if r < 0.75:
            return self.new_array()                     # usually a wrong shape/dtype
        return rng.choice(["None", "(None,)", "np.empty(3)", "[]", "3", "(A(), A())"])

    def kwarg(self, key):
        if key == "out":
            return self.out()
        if key in _ARRAY_KW:
            return self.value()
        pool = KWARG_VALUES.get(key)
        return self.rng.choice(pool) if pool else self.value()


def make_call(targets_, seed, i):
    """Call number i of the campaign with `seed`: (target name, source)."""
    rng = random.Random(f"ember-fuzz:{seed}:{i}")
    kind = rng.choices(["function", "ufunc method", "method"], [0.6, 0.15, 0.25])[0]
    pool = [t for t in targets_ if t[2] == kind] or targets_
    name, f, kind = pool[rng.randrange(len(pool))]
    c = _Call(rng, tame=rng.random() < 0.4)
    sig = _signature(f)
    params = list(sig.parameters.values()) if sig is not None else []
    if kind == "method":
        params = params[1:]                             # self
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    keywords = [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if sig is None:
        n_pos = rng.choice([0, 1, 1, 2, 2, 2, 3, 4])
        keywords = ["axis", "out", "dtype", "keepdims", "where"]
    elif rng.random() < 0.6:
        n_pos = len(required)
    else:
        n_pos = rng.randrange(0, len(positional) + 3)
    args = []
    for j in range(n_pos):
        p = positional[j] if j < len(positional) else None
        args.append(c.kwarg(p.name) if p is not None and p.name in KWARG_VALUES and
                    p.name not in _ARRAY_KW and rng.random() < 0.5 else c.value())
    kwargs = {}
    optional = [k for k in keywords if k not in [p.name for p in positional[:n_pos]]]
    for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
        pool = optional if optional and (c.tame or rng.random() < 0.8) else list(KWARG_VALUES)
        key = rng.choice(pool)
        kwargs[key] = c.kwarg(key)
    call_args = ", ".join(args + [f"{k}={v}" for k, v in kwargs.items()])
    if kind == "method":
        self_name = c.new_array()
        meth = name.split(".", 1)[1]
        expr = f"{self_name}.{meth}({call_args})"
    else:
        expr = f"{name}({call_args})"
    c.lines.append(f"R = {expr}")
    return name, "; ".join(c.lines)


def make_calls(seed, start, count, only=None):
    tg = targets()
    if only:
        tg = [t for t in tg if any(t[0] == o or t[0].startswith(o + ".") for o in only)]
    return [(i,) + make_call(tg, seed, i) for i in range(start, start + count)]
