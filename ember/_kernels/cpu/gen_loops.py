"""Generate ember's elementwise CPU inner loops (Cython) from a table.

Every elementwise op is one row of OPS below: its arity, whether it yields
bool, and one C expression per dtype kind.  The generator writes one strided
inner loop per (op, dtype) with a contiguous fast path (plain indexing the
compiler vectorises) and scalar-broadcast fast paths, plus the cast loops
between all dtypes.  The dispatcher (ember/_core/elementwise.pyx) looks loops
up by (op, dtype code) in a table built from ``loop_addresses()``.

A (op, dtype) pair missing here is not an error: the dispatcher then runs
NumPy's ufunc on zero-copy views of ember's memory.

Usage (run by meson at build time):  python gen_loops.py OUTPUT.pyx
"""
import sys

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
]
BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64,
        "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}

# Expressions: `a`, `b` are compute-type values; {F} is the math suffix
# (f for float/float16, empty for double); {T} the compute type; {U} the
# unsigned type of the same width (integers).  Kind "e" (float16) uses the
# "f" expression unless it has its own.
FLOAT_MAX = "(a if (a >= b or a != a) else b)"
FLOAT_MIN = "(a if (a <= b or a != a) else b)"
OPS = [
    # name, arity, bool output?, {kinds: expression}
    ("add", 2, False, {"b": "(a | b)", "iu": "a + b", "f": "a + b", "c": "a + b"}),
    ("subtract", 2, False, {"iu": "a - b", "f": "a - b", "c": "a - b"}),
    ("multiply", 2, False, {"b": "(a & b)", "iu": "a * b", "f": "a * b", "c": "a * b"}),
    ("divide", 2, False, {"f": "a / b", "c": "a / b"}),
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
    ("exp", 1, False, {"f": "exp{F}(a)"}),
    ("exp2", 1, False, {"f": "exp2{F}(a)"}),
    ("expm1", 1, False, {"f": "expm1{F}(a)"}),
    ("log", 1, False, {"f": "log{F}(a)"}),
    ("log2", 1, False, {"f": "log2{F}(a)"}),
    ("log10", 1, False, {"f": "log10{F}(a)"}),
    ("log1p", 1, False, {"f": "log1p{F}(a)"}),
    ("sin", 1, False, {"f": "sin{F}(a)"}),
    ("cos", 1, False, {"f": "cos{F}(a)"}),
    ("tan", 1, False, {"f": "tan{F}(a)"}),
    ("arcsin", 1, False, {"f": "asin{F}(a)"}),
    ("arccos", 1, False, {"f": "acos{F}(a)"}),
    ("arctan", 1, False, {"f": "atan{F}(a)"}),
    ("sinh", 1, False, {"f": "sinh{F}(a)"}),
    ("cosh", 1, False, {"f": "cosh{F}(a)"}),
    ("tanh", 1, False, {"f": "tanh{F}(a)"}),
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
    ("signbit", 1, True, {"b": "0", "i": "a < 0", "u": "0", "f": "signbit(a) != 0"}),
]

HEADER = '''# Generated by gen_loops.py: do not edit; edit the table there.
# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

cdef extern from "math.h" nogil:
    const double M_PI
    float sqrtf(float)
    double sqrt(double)
    float cbrtf(float)
    double cbrt(double)
    float expf(float)
    double exp(double)
    float exp2f(float)
    double exp2(double)
    float expm1f(float)
    double expm1(double)
    float logf(float)
    double log(double)
    float log2f(float)
    double log2(double)
    float log10f(float)
    double log10(double)
    float log1pf(float)
    double log1p(double)
    float sinf(float)
    double sin(double)
    float cosf(float)
    double cos(double)
    float tanf(float)
    double tan(double)
    float asinf(float)
    double asin(double)
    float acosf(float)
    double acos(double)
    float atanf(float)
    double atan(double)
    float sinhf(float)
    double sinh(double)
    float coshf(float)
    double cosh(double)
    float tanhf(float)
    double tanh(double)
    float asinhf(float)
    double asinh(double)
    float acoshf(float)
    double acosh(double)
    float atanhf(float)
    double atanh(double)
    float floorf(float)
    double floor(double)
    float ceilf(float)
    double ceil(double)
    float truncf(float)
    double trunc(double)
    float rintf(float)
    double rint(double)
    float fabsf(float)
    double fabs(double)
    float powf(float, float)
    double pow(double, double)
    float fmodf(float, float)
    double fmod(double, double)
    float fmaxf(float, float)
    double fmax(double, double)
    float fminf(float, float)
    double fmin(double, double)
    float atan2f(float, float)
    double atan2(double, double)
    float hypotf(float, float)
    double hypot(double, double)
    float copysignf(float, float)
    double copysign(double, double)
    float nextafterf(float, float)
    double nextafter(double, double)
    float log1pf(float)
    double log1p(double)
    int isinf(double)
    int isfinite(double)
    int signbit(double)


# ---- float16 <-> float32, round to nearest even (IEEE 754 binary16)

cdef inline float h2f(uint16_t h) noexcept nogil:
    cdef uint32_t sign = (<uint32_t>(h & 0x8000)) << 16
    cdef uint32_t ex = (h >> 10) & 0x1f
    cdef uint32_t mant = h & 0x3ff
    cdef uint32_t bits
    cdef float f
    if ex == 0:
        if mant == 0:
            bits = sign
        else:
            ex = 113
            while (mant & 0x400) == 0:
                mant <<= 1
                ex -= 1
            mant &= 0x3ff
            bits = sign | (ex << 23) | (mant << 13)
    elif ex == 31:
        bits = sign | 0x7f800000 | (mant << 13)
    else:
        bits = sign | ((ex + 112) << 23) | (mant << 13)
    memcpy(&f, &bits, 4)
    return f


cdef inline uint16_t f2h(float f) noexcept nogil:
    cdef uint32_t bits
    memcpy(&bits, &f, 4)
    cdef uint32_t sign = (bits >> 16) & 0x8000
    cdef int ex = (bits >> 23) & 0xff
    cdef uint32_t mant = bits & 0x7fffff
    cdef int e, shift
    cdef uint32_t hm, rem, halfway, h
    if ex == 0xff:
        return <uint16_t>(sign | 0x7c00 | (0x200 if mant != 0 else 0))
    e = ex - 112
    if e >= 31:
        return <uint16_t>(sign | 0x7c00)
    if e <= 0:
        if e < -10:
            return <uint16_t>sign
        mant |= 0x800000
        shift = 14 - e
        hm = mant >> shift
        rem = mant & ((1u << shift) - 1)
        halfway = 1u << (shift - 1)
        if rem > halfway or (rem == halfway and (hm & 1)):
            hm += 1
        return <uint16_t>(sign | hm)
    h = sign | (<uint32_t>e << 10) | (mant >> 13)
    rem = mant & 0x1fff
    if rem > 0x1000 or (rem == 0x1000 and (h & 1)):
        h += 1
    return <uint16_t>h


# ---- helpers with NumPy's semantics for the integer and float corner cases

cdef inline float _floordiv_ff(float a, float b) noexcept nogil:
    return <float>_floordiv_f(a, b)

cdef inline double _floordiv_f(double a, double b) noexcept nogil:
    cdef double m, d, fd
    if b == 0:
        return a / b
    m = fmod(a, b)
    d = (a - m) / b
    if m != 0 and ((b < 0) != (m < 0)):
        d -= 1.0
    if d != 0:
        fd = floor(d)
        if d - fd > 0.5:
            fd += 1.0
    else:
        fd = copysign(0.0, a / b)
    return fd

cdef inline float _mod_ff(float a, float b) noexcept nogil:
    return <float>_mod_f(a, b)

cdef inline double _mod_f(double a, double b) noexcept nogil:
    cdef double m
    if b == 0:
        return fmod(a, b)
    m = fmod(a, b)
    if m != 0:
        if (b < 0) != (m < 0):
            m += b
    else:
        m = copysign(0.0, b)
    return m

cdef inline float _logaddexpf(float a, float b) noexcept nogil:
    return <float>_logaddexp(a, b)

cdef inline double _logaddexp(double a, double b) noexcept nogil:
    cdef double d
    if a == b:
        return a + 0.6931471805599453
    d = a - b
    if d > 0:
        return a + log1p(exp(-d))
    elif d <= 0:
        return b + log1p(exp(d))
    return d  # nan

cdef inline float _logaddexp2f(float a, float b) noexcept nogil:
    return <float>_logaddexp2(a, b)

cdef inline double _logaddexp2(double a, double b) noexcept nogil:
    cdef double d
    if a == b:
        return a + 1.0
    d = a - b
    if d > 0:
        return a + log1p(exp2(-d)) * 1.4426950408889634
    elif d <= 0:
        return b + log1p(exp2(d)) * 1.4426950408889634
    return d

cdef inline float _heavisidef(float a, float b) noexcept nogil:
    return <float>_heaviside(a, b)

cdef inline double _heaviside(double a, double b) noexcept nogil:
    if a != a:
        return a
    if a == 0:
        return b
    return 1.0 if a > 0 else 0.0
'''

INT_HELPERS = '''
cdef inline {T} _floordiv_{N}({T} a, {T} b) noexcept nogil:
    cdef {T} q
    if b == 0:
        return 0
    if b == -1:
        return <{T}>(<{U}>0 - <{U}>a)
    q = a // b
    if (a % b != 0) and ((a < 0) != (b < 0)):
        q -= 1
    return q

cdef inline {T} _mod_{N}({T} a, {T} b) noexcept nogil:
    cdef {T} m
    if b == 0 or b == -1:
        return 0
    m = a % b
    if m != 0 and ((m < 0) != (b < 0)):
        m += b
    return m

cdef inline {T} _cmod_{N}({T} a, {T} b) noexcept nogil:
    if b == 0 or b == -1:
        return 0
    return a % b

cdef inline {T} _lshift_{N}({T} a, {T} b) noexcept nogil:
    if b < 0 or b >= {BITS}:
        return 0
    return <{T}>(<{U}>a << b)

cdef inline {T} _rshift_{N}({T} a, {T} b) noexcept nogil:
    if b < 0 or b >= {BITS}:
        return <{T}>(-1 if a < 0 else 0)
    return a >> b
'''

UINT_HELPERS = '''
cdef inline {T} _lshift_{N}({T} a, {T} b) noexcept nogil:
    if b >= {BITS}:
        return 0
    return <{T}>(a << b)

cdef inline {T} _rshift_{N}({T} a, {T} b) noexcept nogil:
    if b >= {BITS}:
        return 0
    return a >> b
'''


def unsigned_of(ctype):
    return ctype if ctype.startswith("u") else "u" + ctype


def expression_for(table, kind):
    """The expression an op gives for one dtype kind, or None."""
    if kind == "e":
        if "e" in table:
            return table["e"]
        kind = "f"
    for keys, expr in table.items():
        if kind in keys:
            return expr
    return None


def load(dt, ptr_expr):
    code, name, store, comp, kind, suf = dt
    if kind == "e":
        return f"h2f((<uint16_t*>({ptr_expr}))[0])"
    return f"(<{store}*>({ptr_expr}))[0]"


def load_idx(dt, base, idx):
    code, name, store, comp, kind, suf = dt
    if kind == "e":
        return f"h2f((<uint16_t*>{base})[{idx}])"
    return f"(<{store}*>{base})[{idx}]"


def store_value(dt, expr, is_bool):
    code, name, store, comp, kind, suf = dt
    if is_bool:
        return f"<uint8_t>({expr})"
    if kind == "e":
        return f"f2h({expr})"
    return f"<{store}>({expr})"


def emit_loop(op, arity, is_bool, dt, expr):
    code, name, store, comp, kind, suf = dt
    out_store = "uint8_t" if is_bool else store
    size = {"uint8_t": 1, "int8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "uint32_t": 4,
            "int64_t": 8, "uint64_t": 8, "float": 4, "double": 8, "float complex": 8,
            "double complex": 16}
    isz, osz = size[store], size[out_store]
    fn = f"_{op}_{name}"
    val = store_value(dt, expr, is_bool)
    lines = [f"cdef void {fn}(char** args, const Py_ssize_t* steps, Py_ssize_t n) noexcept nogil:"]
    lines.append(f"    cdef {comp} a")
    if arity == 2:
        lines.append(f"    cdef {comp} b")
    lines.append("    cdef Py_ssize_t i")
    if arity == 2:
        lines.append("    cdef char* p0 = args[0]\n    cdef char* p1 = args[1]\n    cdef char* po = args[2]")
        lines.append("    cdef Py_ssize_t s0 = steps[0], s1 = steps[1], so = steps[2]")
        lines.append(f"    if s0 == {isz} and s1 == {isz} and so == {osz}:")
        lines.append("        for i in range(n):")
        lines.append(f"            a = {load_idx(dt, 'p0', 'i')}")
        lines.append(f"            b = {load_idx(dt, 'p1', 'i')}")
        lines.append(f"            (<{out_store}*>po)[i] = {val}")
        lines.append(f"    elif s0 == {isz} and s1 == 0 and so == {osz}:")
        lines.append(f"        b = {load(dt, 'p1')}")
        lines.append("        for i in range(n):")
        lines.append(f"            a = {load_idx(dt, 'p0', 'i')}")
        lines.append(f"            (<{out_store}*>po)[i] = {val}")
        lines.append(f"    elif s0 == 0 and s1 == {isz} and so == {osz}:")
        lines.append(f"        a = {load(dt, 'p0')}")
        lines.append("        for i in range(n):")
        lines.append(f"            b = {load_idx(dt, 'p1', 'i')}")
        lines.append(f"            (<{out_store}*>po)[i] = {val}")
        lines.append("    else:")
        lines.append("        for i in range(n):")
        lines.append(f"            a = {load(dt, 'p0 + i * s0')}")
        lines.append(f"            b = {load(dt, 'p1 + i * s1')}")
        lines.append(f"            (<{out_store}*>(po + i * so))[0] = {val}")
    else:
        lines.append("    cdef char* p0 = args[0]\n    cdef char* po = args[1]")
        lines.append("    cdef Py_ssize_t s0 = steps[0], so = steps[1]")
        lines.append(f"    if s0 == {isz} and so == {osz}:")
        lines.append("        for i in range(n):")
        lines.append(f"            a = {load_idx(dt, 'p0', 'i')}")
        lines.append(f"            (<{out_store}*>po)[i] = {val}")
        lines.append("    else:")
        lines.append("        for i in range(n):")
        lines.append(f"            a = {load(dt, 'p0 + i * s0')}")
        lines.append(f"            (<{out_store}*>(po + i * so))[0] = {val}")
    return fn, "\n".join(lines) + "\n"


def emit_cast(src, dst):
    """Cast loop src -> dst (also the copy loop when src == dst)."""
    s_code, s_name, s_store, s_comp, s_kind, _ = src
    d_code, d_name, d_store, d_comp, d_kind, _ = dst
    fn = f"_cast_{s_name}_{d_name}"
    v = "v"
    # value in a C type both sides understand
    if s_kind == "c" and d_kind != "c":
        conv = "v.real" if d_kind != "b" else "(v != 0)"
    elif d_kind == "b":
        conv = "(v != 0)"
    else:
        conv = "v"
    if d_kind == "e":
        if s_kind == "e":
            out = "v_h"
        else:
            out = f"f2h(<float>({conv}))"
    elif d_kind == "c":
        out = f"<{d_store}>({conv})"
    else:
        out = f"<{d_store}>({conv})"
    comp = "float" if s_kind == "e" else s_store
    lines = [f"cdef void {fn}(char** args, const Py_ssize_t* steps, Py_ssize_t n) noexcept nogil:",
             "    cdef char* p0 = args[0]", "    cdef char* po = args[1]",
             "    cdef Py_ssize_t s0 = steps[0], so = steps[1], i",
             f"    cdef {comp} v"]
    if s_kind == "e" and d_kind == "e":
        lines.append("    cdef uint16_t v_h")
        body_c = ["            v_h = (<uint16_t*>p0)[i]", "            (<uint16_t*>po)[i] = v_h"]
        body_s = ["            v_h = (<uint16_t*>(p0 + i * s0))[0]", "            (<uint16_t*>(po + i * so))[0] = v_h"]
    else:
        ld_c = f"h2f((<uint16_t*>p0)[i])" if s_kind == "e" else f"(<{s_store}*>p0)[i]"
        ld_s = f"h2f((<uint16_t*>(p0 + i * s0))[0])" if s_kind == "e" else f"(<{s_store}*>(p0 + i * s0))[0]"
        body_c = [f"            v = {ld_c}", f"            (<{d_store}*>po)[i] = {out}"]
        body_s = [f"            v = {ld_s}", f"            (<{d_store}*>(po + i * so))[0] = {out}"]
    ssz = {"b": 1}.get(s_kind, None)
    lines.append(f"    if s0 == sizeof({s_store}) and so == sizeof({d_store}):")
    lines.append("        for i in range(n):")
    lines += body_c
    lines.append("    else:")
    lines.append("        for i in range(n):")
    lines += body_s
    return fn, "\n".join(lines) + "\n"


def generate():
    out = [HEADER]
    for dt in DTYPES:
        code, name, store, comp, kind, suf = dt
        if kind == "i":
            out.append(INT_HELPERS.format(T=store, N=name, U=unsigned_of(store), BITS=BITS[name]))
        elif kind == "u":
            out.append(UINT_HELPERS.format(T=store, N=name, BITS=BITS[name]))
    registry = []
    for op, arity, is_bool, table in OPS:
        for dt in DTYPES:
            code, name, store, comp, kind, suf = dt
            expr = expression_for(table, kind)
            if expr is None:
                continue
            expr = expr.format(F=suf or "", T=comp, N=name, U=unsigned_of(store) if kind in "iu" else "")
            fn, src = emit_loop(op, arity, is_bool, dt, expr)
            out.append(src)
            registry.append((op, code, fn))
    casts = []
    for src in DTYPES:
        for dst in DTYPES:
            fn, code = emit_cast(src, dst)
            out.append(code)
            casts.append((src[0], dst[0], fn))
    out.append("\nOP_NAMES = (" + ", ".join(repr(o[0]) for o in OPS) + ",)\n")
    out.append("OP_ARITY = {" + ", ".join(f"{o[0]!r}: {o[1]}" for o in OPS) + "}\n")
    out.append("OP_BOOL_OUT = {" + ", ".join(f"{o[0]!r}: {o[2]}" for o in OPS) + "}\n")
    out.append("\n\ndef loop_addresses():\n"
               '    """[(op name, dtype code, address of its inner loop)]"""\n'
               "    return [\n")
    for op, code, fn in registry:
        out.append(f"        ({op!r}, {code}, <size_t>&{fn}),\n")
    out.append("    ]\n\n\ndef cast_addresses():\n"
               '    """[(source dtype code, target dtype code, address of the cast loop)]"""\n'
               "    return [\n")
    for s, d, fn in casts:
        out.append(f"        ({s}, {d}, <size_t>&{fn}),\n")
    out.append("    ]\n")
    return "".join(out)


if __name__ == "__main__":
    with open(sys.argv[1], "w") as f:
        f.write(generate())
