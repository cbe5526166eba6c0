# The backward engine: graph nodes and their execution (see engine.pyx).
from ember._core.array cimport ndarray

cdef class Node:
    cdef public tuple next_nodes     # per input slot: the Node its gradient goes to, or None
    cdef public tuple next_nrs       # per input slot: which output of that node it is
    cdef public int num_outputs
    cdef public list pre_hooks       # [(output_nr, fn)]: run on incoming gradients
    cdef public bint released        # saved data freed after a backward without retain_graph
    cdef public object creation_trace  # anomaly mode: the stack where the forward ran
    cdef public object out_meta      # per output: (shape, dtype) to materialise missing grads
    cdef object _slot                # its _Slot during a backward pass (engine.pyx _Pass)
    cdef object __weakref__
    cpdef list apply(self, list grads)
    cdef void release(self)


cdef class AccumulateGrad(Node):
    cdef public object leaf_ref      # weakref to the leaf array


cdef class RuleNode
ctypedef object (*crule_t)(RuleNode node, object g)

cdef class Rule:
    cdef public object fn            # fn(grad, result, *args, **kwargs) -> grads per positional arg
    cdef public str name
    cdef public bint save_args
    cdef public bint save_result
    cdef public bint save_cross      # keep an operand only if the other requires grad
    cdef public object forward       # the op itself (views are re-derived with it)
    cdef crule_t cfn                 # a C version of fn for hot ops (NotImplemented: use fn)


cdef class RuleNode(Node):
    cdef public Rule rule
    cdef readonly tuple args
    cdef dict kwargs
    cdef list saved                  # arrays among args (flattened), for version checks
    cdef list versions
    cdef readonly object result      # detached alias of the output(s) when the rule needs it
    cdef Py_ssize_t result_version
    cdef tuple slots                 # per input slot: (arg index, index in a list arg or -1)
    cdef tuple slot_meta             # per input slot: the input's (shape, dtype)
    cdef object _unpack_result(self, bint connect)


cdef class CallableNode(Node):
    cdef public object fn            # fn(list of grads per output) -> grads per input slot
    cdef public str _name
    cdef public tuple slot_meta
    cdef public object on_release


cdef object record(Rule rule, tuple args, dict kwargs, object result)
cdef object record_ew(Rule rule, object a, object b, bint is_unary, ndarray res)
