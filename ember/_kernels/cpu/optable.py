"""The elementwise op table: every op is one row (name, arity, bool output,
one C expression per dtype kind).  gen_loops.py turns it into Cython inner
loops at build time; the dispatcher reads the names and output kinds at run time.
"""

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
    # name, arity, bool output?, {kinds: expression}
    ("add", 2, False, {"b": "(a | b)", "iu": "a + b", "f": "a + b", "c": "a + b"}),
    ("subtract", 2, False, {"iu": "a - b", "f": "a - b", "c": "a - b"}),
    ("multiply", 2, False, {"b": "(a & b)", "iu": "a * b", "f": "a * b", "c": "a * b"}),
    ("divide", 2, False, {"f": "a / b", "c": "_cdiv{C}(a, b)"}),
    ("floor_divide", 2, False, {"i": "_floordiv_{N}(a, b)", "u": "((a // b) if b != 0 else 0)",
                                "f": "_floordiv_f{F}(a, b)"}),
    ("remainder", 2, False, {"i": "_mod_{N}(a, b)", "u": "((a % b) if b != 0 else 0)",
                             "f": "_mod_f{F}(a, b)"}),
    ("fmod", 2, False, {"i": "(_cmod_{N}(a, b))", "u": "((a % b) if b != 0 else 0)",
                        "f": "fmod{F}(a, b)"}),
    ("power", 2, False, {"f": "pow{F}(a, b)"}),
    ("maximum", 2, False, {"b": "(a | b)", "iu": "(a if a >= b else b)", "f": FLOAT_MAX}),
    ("minimum", 2, False, {"b": "(a & b)", "iu": "(a if a <= b else b)", "f": FLOAT_MIN}),
    ("fmax", 2, False, {"b": "(a | b)", "iu": "(a if a >= b else b)", "f": "fmax{F}(a, b)"}),
    ("fmin", 2, False, {"b": "(a & b)", "iu": "(a if a <= b else b)", "f": "fmin{F}(a, b)"}),
    ("arctan2", 2, False, {"f": "atan2{F}(a, b)"}),
    ("hypot", 2, False, {"f": "hypot{F}(a, b)"}),
    ("copysign", 2, False, {"f": "copysign{F}(a, b)"}),
    ("nextafter", 2, False, {"f": "nextafter{F}(a, b)", "e": None}),
    ("logaddexp", 2, False, {"f": "_logaddexp{F}(a, b)"}),
    ("logaddexp2", 2, False, {"f": "_logaddexp2{F}(a, b)"}),
    ("heaviside", 2, False, {"f": "_heaviside{F}(a, b)"}),
    ("bitwise_and", 2, False, {"b": "(a & b)", "iu": "(a & b)"}),
    ("bitwise_or", 2, False, {"b": "(a | b)", "iu": "(a | b)"}),
    ("bitwise_xor", 2, False, {"b": "(a ^ b)", "iu": "(a ^ b)"}),
    ("left_shift", 2, False, {"i": "_lshift_{N}(a, b)", "u": "_lshift_{N}(a, b)"}),
    ("right_shift", 2, False, {"i": "_rshift_{N}(a, b)", "u": "_rshift_{N}(a, b)"}),
    ("equal", 2, True, {"b": "a == b", "iu": "a == b", "f": "a == b", "c": "a == b"}),
    ("not_equal", 2, True, {"b": "a != b", "iu": "a != b", "f": "a != b", "c": "a != b"}),
    ("less", 2, True, {"b": "a < b", "iu": "a < b", "f": "a < b"}),
    ("less_equal", 2, True, {"b": "a <= b", "iu": "a <= b", "f": "a <= b"}),
    ("greater", 2, True, {"b": "a > b", "iu": "a > b", "f": "a > b"}),
    ("greater_equal", 2, True, {"b": "a >= b", "iu": "a >= b", "f": "a >= b"}),
    ("logical_and", 2, True, {"b": "(a != 0) & (b != 0)", "iu": "(a != 0) & (b != 0)",
                              "f": "(a != 0) & (b != 0)", "c": "(a != 0) & (b != 0)"}),
    ("logical_or", 2, True, {"b": "(a != 0) | (b != 0)", "iu": "(a != 0) | (b != 0)",
                             "f": "(a != 0) | (b != 0)", "c": "(a != 0) | (b != 0)"}),
    ("logical_xor", 2, True, {"b": "(a != 0) ^ (b != 0)", "iu": "(a != 0) ^ (b != 0)",
                              "f": "(a != 0) ^ (b != 0)", "c": "(a != 0) ^ (b != 0)"}),
    # unary
    ("negative", 1, False, {"iu": "-a", "f": "-a", "c": "-a"}),
    ("positive", 1, False, {"iu": "a", "f": "a", "c": "a"}),
    ("absolute", 1, False, {"b": "a", "i": "(a if a >= 0 else -a)", "u": "a", "f": "fabs{F}(a)"}),
    ("square", 1, False, {"iu": "a * a", "f": "a * a", "c": "a * a"}),
    ("reciprocal", 1, False, {"f": "1 / a", "c": "1 / a"}),
    ("sqrt", 1, False, {"f": "sqrt{F}(a)"}),
    ("cbrt", 1, False, {"f": "cbrt{F}(a)"}),
    # exp, expm1, log, log1p, tanh: float32 (and 16-bit) run gen_loops' branch-free versions
    # (vectorised; <= 1-2 ulp); float64 calls libm through the _exp... wrappers
    ("exp", 1, False, {"f": "_exp{F}(a)"}),
    ("exp2", 1, False, {"f": "exp2{F}(a)"}),
    ("expm1", 1, False, {"f": "_expm1{F}(a)", "c": "_cexpm1{C}(a)"}),
    ("log", 1, False, {"f": "_log{F}(a)"}),
    ("log2", 1, False, {"f": "log2{F}(a)"}),
    ("log10", 1, False, {"f": "log10{F}(a)"}),
    ("log1p", 1, False, {"f": "_log1p{F}(a)"}),
    ("sin", 1, False, {"f": "_sin{F}(a)"}),      # float32: em_math.h + libm fix-up
    ("cos", 1, False, {"f": "_cos{F}(a)"}),      # float32: em_math.h + libm fix-up
    ("tan", 1, False, {"f": "tan{F}(a)"}),
    ("arcsin", 1, False, {"f": "asin{F}(a)"}),
    ("arccos", 1, False, {"f": "acos{F}(a)"}),
    ("arctan", 1, False, {"f": "atan{F}(a)"}),
    ("sinh", 1, False, {"f": "sinh{F}(a)"}),
    ("cosh", 1, False, {"f": "cosh{F}(a)"}),
    ("tanh", 1, False, {"f": "_tanh{F}(a)"}),
    ("arcsinh", 1, False, {"f": "asinh{F}(a)"}),
    ("arccosh", 1, False, {"f": "acosh{F}(a)"}),
    ("arctanh", 1, False, {"f": "atanh{F}(a)"}),
    ("deg2rad", 1, False, {"f": "a * <{T}>(M_PI / 180.0)"}),
    ("rad2deg", 1, False, {"f": "a * <{T}>(180.0 / M_PI)"}),
    ("floor", 1, False, {"iu": "a", "b": "a", "f": "floor{F}(a)"}),
    ("ceil", 1, False, {"iu": "a", "b": "a", "f": "ceil{F}(a)"}),
    ("trunc", 1, False, {"iu": "a", "b": "a", "f": "trunc{F}(a)"}),
    ("rint", 1, False, {"f": "rint{F}(a)"}),
    ("sign", 1, False, {"i": "<{T}>((a > 0) - (a < 0))", "u": "<{T}>(a > 0)",
                        "f": "(<{T}>((a > 0) - (a < 0)) if a == a else a)"}),
    ("invert", 1, False, {"b": "(a ^ 1)", "iu": "~a"}),
    ("logical_not", 1, True, {"b": "a == 0", "iu": "a == 0", "f": "a == 0", "c": "a == 0"}),
    ("isnan", 1, True, {"b": "0", "iu": "0", "f": "a != a"}),
    ("isinf", 1, True, {"b": "0", "iu": "0", "f": "isinf(a) != 0"}),
    ("isfinite", 1, True, {"b": "1", "iu": "1", "f": "isfinite(a) != 0"}),
    ("signbit", 1, True, {"b": "0", "i": "a < 0", "u": "0", "f": "signbit(a) != 0",
                           # the double keeps GCC 12's vectoriser off an internal error on bfloat16
                           "e": "signbit(<double>a) != 0"}),
]

