# cython: wraparound=True, boundscheck=True
"""C versions of the hottest gradient rules (real dtypes).

The Python rules in ember/autograd/rules/ define every gradient; for the ops
that dominate small models (add, subtract, multiply, divide, negative, tanh,
exp, sum) this module attaches a C function to the same Rule that the engine
calls first.  It computes the same formula with direct kernel calls (no
Python frames) and returns NotImplemented for the cases it does not cover
(complex dtypes, or create_graph where the output itself must be part of the
graph), which then run the Python rule.
"""
from ember._core.array cimport ndarray, new_view, new_empty, grad_enabled
from ember._core.dtypes cimport KIND, T_FLOAT32, T_FLOAT64
from ember._core.elementwise cimport binary, binary_ag, unary_ag
from ember._core.opcodes cimport OP_ADD, OP_SUBTRACT, OP_MULTIPLY, OP_DIVIDE, OP_NEGATIVE
from ember.autograd.engine cimport Rule, RuleNode, crule_t

from ember.autograd.registry import RULES


cdef inline bint _tracked(object a) noexcept:
    return isinstance(a, ndarray) and (<ndarray>a)._requires_grad


cdef inline bint _complex(object a) noexcept:
    if isinstance(a, ndarray):
        return KIND[(<ndarray>a).tcode] == b'c'
    return isinstance(a, complex)


cdef object _add(RuleNode node, object g):
    return (g, g)


cdef object _subtract(RuleNode node, object g):
    return (g, unary_ag(OP_NEGATIVE, g, None))


cdef object _negative(RuleNode node, object g):
    return (unary_ag(OP_NEGATIVE, g, None),)


cdef bint _slot(RuleNode node, int i):
    """Whether positional argument i of the op requires grad (it has an input slot)."""
    for s in node.slots:
        if (<tuple>s)[0] == i:
            return True
    return False


cdef object _multiply(RuleNode node, object g):
    a, b = node.args              # an operand the other does not need is an ArrayMeta
    if _complex(a) or _complex(b) or _complex(g):
        return NotImplemented
    return (binary_ag(OP_MULTIPLY, g, b, None) if _slot(node, 0) else None,
            binary_ag(OP_MULTIPLY, g, a, None) if _slot(node, 1) else None)


cdef object _divide(RuleNode node, object g):
    a, b = node.args
    if _complex(a) or _complex(b) or _complex(g):
        return NotImplemented
    ga = binary_ag(OP_DIVIDE, g, b, None)
    gb = None
    if _tracked(b):
        # -g * a / b**2 = -(g / b) * (a / b)
        gb = unary_ag(OP_NEGATIVE, binary_ag(OP_MULTIPLY, ga, binary_ag(OP_DIVIDE, a, b, None),
                                             None), None)
    return (ga if _tracked(a) else None, gb)


cdef object _from_result(RuleNode node, object g, bint tanh):
    """exp: g * y;  tanh: g * (1 - y * y)  (y the saved output)."""
    cdef ndarray t
    if grad_enabled() or _complex(g) or node.result is None:
        return NotImplemented          # create_graph: the Python rule uses the attached output
    y = node.result
    if not tanh:
        return (binary(OP_MULTIPLY, g, y, None),)
    if _small_host_same(g, y):
        return (_tanh_grad_loop(<ndarray>g, <ndarray>y),)
    t = <ndarray>binary(OP_MULTIPLY, y, y, None)
    binary(OP_SUBTRACT, 1.0, t, t)
    binary(OP_MULTIPLY, g, t, t)
    return (t,)


# up to this many elements the tanh gradient runs as one plain loop (one allocation and
# one pass instead of three kernel calls); larger arrays take the threaded kernels
cdef Py_ssize_t SMALL_LOOP_MAX = 16384


cdef bint _small_host_same(object g, object y) noexcept:
    """g and y: host arrays of one float dtype and shape, C-contiguous and small."""
    cdef ndarray a, b
    cdef int d
    if not (isinstance(g, ndarray) and isinstance(y, ndarray)):
        return False
    a, b = <ndarray>g, <ndarray>y
    if a.tcode != b.tcode or (a.tcode != T_FLOAT32 and a.tcode != T_FLOAT64) \
            or not a.c_contig or not b.c_contig or a.ndim != b.ndim \
            or a.size > SMALL_LOOP_MAX or a.storage.device_index >= 0 \
            or b.storage.device_index >= 0:
        return False
    for d in range(a.ndim):
        if a.shape[d] != b.shape[d]:
            return False
    return True


cdef ndarray _tanh_grad_loop(ndarray g, ndarray y):
    """g * (1 - y * y), rounded after each operation as the three kernel calls do."""
    cdef ndarray out = new_empty(g.tcode, g.ndim, g.shape)
    cdef Py_ssize_t i, n = g.size
    cdef float t32
    cdef double t64
    cdef const float* g32 = <const float*>g.data
    cdef const float* y32 = <const float*>y.data
    cdef float* o32 = <float*>out.data
    cdef const double* g64 = <const double*>g.data
    cdef const double* y64 = <const double*>y.data
    cdef double* o64 = <double*>out.data
    if g.tcode == T_FLOAT32:
        for i in range(n):
            t32 = y32[i] * y32[i]
            t32 = 1.0 - t32
            o32[i] = g32[i] * t32
    else:
        for i in range(n):
            t64 = y64[i] * y64[i]
            t64 = 1.0 - t64
            o64[i] = g64[i] * t64
    return out


cdef object _exp(RuleNode node, object g):
    return _from_result(node, g, False)


cdef object _tanh(RuleNode node, object g):
    return _from_result(node, g, True)


cdef object _sum(RuleNode node, object g):
    """sum over all axes: the 0-d gradient seen as an array of the input's shape
    (a 0-d result means every axis was reduced, whatever axis= said)."""
    cdef ndarray x, v
    cdef Py_ssize_t shape[32]
    cdef Py_ssize_t strides[32]
    cdef Py_ssize_t i
    if len(node.args) != 1 or len(node.slots) != 1 or (<tuple>node.slots[0])[1] != -1 \
            or not isinstance(g, ndarray) or (<ndarray>g)._requires_grad:
        return NotImplemented           # not a single array argument (e.g. sum of a list)
    if node.kwargs and (node.kwargs.get("where") is not None or
                        node.kwargs.get("initial") is not None):
        return NotImplemented
    x = <ndarray>g
    if x.ndim != 0:
        return NotImplemented
    meta = node.slot_meta[0]
    tshape = meta[0]
    if len(tshape) > 32:
        return NotImplemented
    for i in range(len(tshape)):
        shape[i] = tshape[i]
        strides[i] = 0
    v = new_view(x, len(tshape), shape, strides, x.offset, x.tcode)
    v.readonly = True                   # a broadcast, as ember.broadcast_to gives it
    return (v,)


cdef _set(str name, crule_t fn):
    cdef Rule rule = RULES.get(name)
    if rule is not None:
        rule.cfn = fn


def install():
    """Attach the C rules to the registered Python rules of the same ops."""
    _set("add", _add)
    _set("subtract", _subtract)
    _set("negative", _negative)
    _set("multiply", _multiply)
    _set("divide", _divide)
    _set("exp", _exp)
    _set("tanh", _tanh)
    _set("sum", _sum)
