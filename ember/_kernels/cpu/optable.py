"""The elementwise op table: every elementwise op is one row, and this is the only
place its metadata is written down.

A row (``Op``) says:

- ``name``: NumPy's ufunc name (``ember.<name>`` becomes an ``ember.ufunc``);
- ``arity``: 1 or 2 inputs;
- ``cls``: how the op picks its loop dtype from the promoted input dtype:
  ``"a"`` arithmetic (the promoted dtype), ``"f"`` float-valued (integer and bool
  inputs compute in the default float dtype), ``"c"`` comparison/logical/test
  (the promoted dtype, bool output), ``"i"`` integer-only (bool and integers;
  floats are a TypeError);
- ``loops``: one C expression per dtype kind (keys are kind letters of DTYPES:
  ``b`` bool, ``i`` signed, ``u`` unsigned, ``f`` float, ``e`` 16-bit float,
  ``c`` complex; a key may group several, as ``"iu"``); a kind with no expression
  runs NumPy's ufunc on zero-copy views (``elementwise._fallback``);
- ``gpu``: the kernel name in ``ember/cuda/kernels/elementwise.cu``
  (``ember_<gpu>_<dtype>_contig``...), or None (CuPy's ufunc of the same name runs);
- ``grad``: True when the op has a gradient rule (``@defgrad(name)`` in
  ``ember/autograd/rules/elementwise.py``, checked by tests/test_optable.py); False
  when its results are constants for autograd (comparisons, bit operations,
  ``floor_divide``...).  Defaults to True for classes "a" and "f".

Who reads it: ``gen_loops.py`` at build time (the inner loops, the libm
declarations the expressions call, and ``ember/_core/opcodes.pxd``: ``OP_<NAME>``
is the row's index); ``ember/_core/elementwise.pyx`` at import (names, classes);
``ember/_api/elementwise.py`` (one ``ember.ufunc`` per row, with its arity);
``ember/autograd`` (which rules must exist, which ops are non-differentiable);
``ember/cuda/_elementwise.py`` (GPU kernel names); and the tests' op lists.

Adding an op is this row plus, when ``grad`` is True, its ``@defgrad`` rule.
"""
from collections import namedtuple

Op = namedtuple("Op", "name arity cls loops gpu grad")


def _op(name, arity, cls, loops, gpu=None, grad=None):
    assert arity in (1, 2) and cls in ("a", "f", "c", "i"), (name, arity, cls)
    return Op(name, arity, cls, loops, gpu, cls in "af" if grad is None else grad)


# code, name, storage C type, compute C type, kind, math-function suffix
DTYPES = [
    (0, "bool", "uint8_t", "uint8_t", "b", None),
    (1, "int8", "int8_t", "int8_t", "i", None),
    (2, "int16", "int16_t", "int16_t", "i", None),
    (3, "int32", "int32_t", "int32_t", "i", None),
    (4, "int64", "int64_t", "int64_t", "i", None),
    (5, "uint8", "uint8_t", "uint8_t", "u", None),
    (6, "uint16", "uint16_t", "uint16_t", "u", None),
    (7, "uint32", "uint32_t", "uint32_t", "u", None),
    (8, "uint64", "uint64_t", "uint64_t", "u", None),
    (9, "float16", "uint16_t", "float", "e", "f"),
    (10, "float32", "float", "float", "f", "f"),
    (11, "float64", "double", "double", "f", ""),
    (12, "complex64", "float complex", "float complex", "c", None),
    (13, "complex128", "double complex", "double complex", "c", None),
    (14, "bfloat16", "uint16_t", "float", "e", "f"),
]
BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64,
        "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}

# Expressions: `a`, `b` are compute-type values; {F} is the math suffix
# (f for float/float16, empty for double); {T} the compute type; {U} the
# unsigned type of the same width (integers).  Kind "e" (float16, bfloat16:
# 16-bit storage, float32 arithmetic) uses the
# "f" expression unless it has its own.
FLOAT_MAX = "(a if (a >= b or a != a) else b)"
FLOAT_MIN = "(a if (a <= b or a != a) else b)"
OPS = [
    # name, arity, class, {dtype kinds: C expression}, gpu=kernel, grad=has a rule
    _op("add", 2, "a", {"b": "(a | b)", "iu": "a + b", "f": "a + b", "c": "a + b"}, gpu="add"),
    _op("subtract", 2, "a", {"iu": "a - b", "f": "a - b", "c": "a - b"}, gpu="sub"),
    _op("multiply", 2, "a", {"b": "(a & b)", "iu": "a * b", "f": "a * b", "c": "a * b"}, gpu="mul"),
    _op("divide", 2, "f", {"f": "a / b", "c": "_cdiv{C}(a, b)"}, gpu="div"),
    _op("floor_divide", 2, "a", {"i": "_floordiv_{N}(a, b)", "u": "((a // b) if b != 0 else 0)",
                                "f": "_floordiv_f{F}(a, b)"}, grad=False),
    _op("remainder", 2, "a", {"i": "_mod_{N}(a, b)", "u": "((a % b) if b != 0 else 0)",
                             "f": "_mod_f{F}(a, b)"}),
    _op("fmod", 2, "a", {"i": "(_cmod_{N}(a, b))", "u": "((a % b) if b != 0 else 0)",
                        "f": "fmod{F}(a, b)"}),
    _op("power", 2, "a", {"f": "pow{F}(a, b)"}, gpu="pow"),
    _op("maximum", 2, "a", {"b": "(a | b)", "iu": "(a if a >= b else b)", "f": FLOAT_MAX},
        gpu="maximum"),
    _op("minimum", 2, "a", {"b": "(a & b)", "iu": "(a if a <= b else b)", "f": FLOAT_MIN},
        gpu="minimum"),
    _op("fmax", 2, "a", {"b": "(a | b)", "iu": "(a if a >= b else b)", "f": "fmax{F}(a, b)"}),
    _op("fmin", 2, "a", {"b": "(a & b)", "iu": "(a if a <= b else b)", "f": "fmin{F}(a, b)"}),
    _op("arctan2", 2, "f", {"f": "atan2{F}(a, b)"}),
    _op("hypot", 2, "f", {"f": "hypot{F}(a, b)"}),
    _op("copysign", 2, "f", {"f": "copysign{F}(a, b)"}),
    _op("nextafter", 2, "f", {"f": "nextafter{F}(a, b)", "e": None}),
    _op("logaddexp", 2, "f", {"f": "_logaddexp{F}(a, b)"}),
    _op("logaddexp2", 2, "f", {"f": "_logaddexp2{F}(a, b)"}),
    _op("heaviside", 2, "f", {"f": "_heaviside{F}(a, b)"}, grad=False),
    _op("bitwise_and", 2, "i", {"b": "(a & b)", "iu": "(a & b)"}),
    _op("bitwise_or", 2, "i", {"b": "(a | b)", "iu": "(a | b)"}),
    _op("bitwise_xor", 2, "i", {"b": "(a ^ b)", "iu": "(a ^ b)"}),
    _op("left_shift", 2, "i", {"i": "_lshift_{N}(a, b)", "u": "_lshift_{N}(a, b)"}),
    _op("right_shift", 2, "i", {"i": "_rshift_{N}(a, b)", "u": "_rshift_{N}(a, b)"}),
    _op("equal", 2, "c", {"b": "a == b", "iu": "a == b", "f": "a == b", "c": "a == b"}),
    _op("not_equal", 2, "c", {"b": "a != b", "iu": "a != b", "f": "a != b", "c": "a != b"}),
    _op("less", 2, "c", {"b": "a < b", "iu": "a < b", "f": "a < b"}),
    _op("less_equal", 2, "c", {"b": "a <= b", "iu": "a <= b", "f": "a <= b"}),
    _op("greater", 2, "c", {"b": "a > b", "iu": "a > b", "f": "a > b"}),
    _op("greater_equal", 2, "c", {"b": "a >= b", "iu": "a >= b", "f": "a >= b"}),
    _op("logical_and", 2, "c", {"b": "(a != 0) & (b != 0)", "iu": "(a != 0) & (b != 0)",
                              "f": "(a != 0) & (b != 0)", "c": "(a != 0) & (b != 0)"}),
    _op("logical_or", 2, "c", {"b": "(a != 0) | (b != 0)", "iu": "(a != 0) | (b != 0)",
                             "f": "(a != 0) | (b != 0)", "c": "(a != 0) | (b != 0)"}),
    _op("logical_xor", 2, "c", {"b": "(a != 0) ^ (b != 0)", "iu": "(a != 0) ^ (b != 0)",
                              "f": "(a != 0) ^ (b != 0)", "c": "(a != 0) ^ (b != 0)"}),
    # unary
    _op("negative", 1, "a", {"iu": "-a", "f": "-a", "c": "-a"}, gpu="neg"),
    _op("positive", 1, "a", {"iu": "a", "f": "a", "c": "a"}),
    _op("absolute", 1, "a", {"b": "a", "i": "(a if a >= 0 else -a)", "u": "a", "f": "fabs{F}(a)"},
        gpu="abs"),
    _op("square", 1, "a", {"iu": "a * a", "f": "a * a", "c": "a * a"}),
    _op("reciprocal", 1, "f", {"f": "1 / a", "c": "1 / a"}),
    _op("sqrt", 1, "f", {"f": "sqrt{F}(a)"}, gpu="sqrt"),
    _op("cbrt", 1, "f", {"f": "cbrt{F}(a)"}),
    # exp, expm1, log, log1p, tanh: float32 (and 16-bit) run gen_loops' branch-free versions
    # (vectorised; <= 1-2 ulp); float64 calls libm through the _exp... wrappers
    _op("exp", 1, "f", {"f": "_exp{F}(a)"}, gpu="exp"),
    _op("exp2", 1, "f", {"f": "exp2{F}(a)"}),
    _op("expm1", 1, "f", {"f": "_expm1{F}(a)", "c": "_cexpm1{C}(a)"}),
    _op("log", 1, "f", {"f": "_log{F}(a)"}, gpu="log"),
    _op("log2", 1, "f", {"f": "log2{F}(a)"}),
    _op("log10", 1, "f", {"f": "log10{F}(a)"}),
    _op("log1p", 1, "f", {"f": "_log1p{F}(a)"}),
    _op("sin", 1, "f", {"f": "_sin{F}(a)"}),      # float32: em_math.h + libm fix-up
    _op("cos", 1, "f", {"f": "_cos{F}(a)"}),      # float32: em_math.h + libm fix-up
    _op("tan", 1, "f", {"f": "tan{F}(a)"}),
    _op("arcsin", 1, "f", {"f": "asin{F}(a)"}),
    _op("arccos", 1, "f", {"f": "acos{F}(a)"}),
    _op("arctan", 1, "f", {"f": "atan{F}(a)"}),
    _op("sinh", 1, "f", {"f": "sinh{F}(a)"}),
    _op("cosh", 1, "f", {"f": "cosh{F}(a)"}),
    _op("tanh", 1, "f", {"f": "_tanh{F}(a)"}, gpu="tanh"),
    _op("arcsinh", 1, "f", {"f": "asinh{F}(a)"}),
    _op("arccosh", 1, "f", {"f": "acosh{F}(a)"}),
    _op("arctanh", 1, "f", {"f": "atanh{F}(a)"}),
    _op("deg2rad", 1, "f", {"f": "a * <{T}>(M_PI / 180.0)"}),
    _op("rad2deg", 1, "f", {"f": "a * <{T}>(180.0 / M_PI)"}),
    _op("floor", 1, "a", {"iu": "a", "b": "a", "f": "floor{F}(a)"}),
    _op("ceil", 1, "a", {"iu": "a", "b": "a", "f": "ceil{F}(a)"}),
    _op("trunc", 1, "a", {"iu": "a", "b": "a", "f": "trunc{F}(a)"}),
    _op("rint", 1, "f", {"f": "rint{F}(a)"}),
    _op("sign", 1, "a", {"i": "<{T}>((a > 0) - (a < 0))", "u": "<{T}>(a > 0)",
                        "f": "(<{T}>((a > 0) - (a < 0)) if a == a else a)"}),
    _op("invert", 1, "i", {"b": "(a ^ 1)", "iu": "~a"}),
    _op("logical_not", 1, "c", {"b": "a == 0", "iu": "a == 0", "f": "a == 0", "c": "a == 0"}),
    _op("isnan", 1, "c", {"b": "0", "iu": "0", "f": "a != a"}),
    _op("isinf", 1, "c", {"b": "0", "iu": "0", "f": "isinf(a) != 0"}),
    _op("isfinite", 1, "c", {"b": "1", "iu": "1", "f": "isfinite(a) != 0"}),
    _op("signbit", 1, "c", {"b": "0", "i": "a < 0", "u": "0", "f": "signbit(a) != 0",
                           # the double keeps GCC 12's vectoriser off an internal error on bfloat16
                           "e": "signbit(<double>a) != 0"}),
]


def by_name():
    """{op name: its row}"""
    return {op.name: op for op in OPS}


def names(arity=None, cls=None, grad=None):
    """The ops' names in table order, optionally those of one arity, class(es) or
    differentiability (``names(cls="f")``: the float-valued ops)."""
    return [op.name for op in OPS if (arity is None or op.arity == arity)
            and (cls is None or op.cls in cls) and (grad is None or op.grad == grad)]
