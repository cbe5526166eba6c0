# cython: language_level=3
"""Fused multi-tensor optimizer updates for ember.optim.

Each ``*_group`` function takes one parameter group: it walks the group's
parameters (skipping those whose ``.grad`` is None), creates their state on
first use, checks dtypes/shapes, bumps the per-parameter step counters and
computes the per-parameter values (``step_size``, ``bias_correction2_sqrt``)
in double precision, then updates every parameter in one fused pass
per element, GIL released, several threads over chunks when the group is big.
The kernels (optim_simd.h) take the optimizer's options as one struct with
torch.optim's names (``emb_adam_options``...) and round exactly where
PyTorch's single-tensor CPU path rounds; ``ember/optim/reference.py`` is the
plain specification they are tested against.

Parameters and gradients must be floating of the same dtype and shape.  16-bit
parameters (float16, bfloat16) have float32 state and are updated in float32,
rounded once per step: a block of the parameter and of its gradient is widened
into float32 buffers on the stack, the float32 kernel updates the block, and the
block is rounded back, all in the one pass (the same bits as widening the whole
arrays first).  Non-contiguous parameters or gradients are copied into
contiguous buffers and the parameter copied back after the update.
"""
cimport cython
from cython.parallel cimport prange
from libc.stdlib cimport malloc, free
from libc.string cimport memset
from libc.math cimport pow
from cpython.long cimport PyLong_FromVoidPtr
from cpython.dict cimport PyDict_GetItem
from cpython.ref cimport PyObject

from ember._core.array cimport ndarray, new_empty, shape_tuple
from ember._core.dtypes cimport (T_FLOAT32, T_FLOAT64, T_BFLOAT16, DTYPE_OBJS, default_float,
                                 is_half)
from ember._core.elementwise cimport num_threads, cast, assign

import numpy as _np
from ember._core.util import numpy_view as _numpy_view, wrap as _wrap

cdef extern from "em_math.h" nogil:
    # 16-bit floats <-> float32 runs: the conversions of ember's cast loops, bit for bit
    void em_widen16(int bf16, const unsigned short*, float*, Py_ssize_t)
    void em_narrow16(int bf16, const float*, unsigned short*, Py_ssize_t)

cdef extern from "optim_simd.h" nogil:
    # each optimizer's options, with torch.optim's names (see optim_simd.h)
    ctypedef struct emb_sgd_options:
        double lr, momentum, dampening, weight_decay
        int nesterov, maximize
    ctypedef struct emb_adam_options:
        double lr, beta1, beta2, eps, weight_decay
        int amsgrad, maximize, decoupled_weight_decay
    ctypedef struct emb_rmsprop_options:
        double lr, alpha, eps, weight_decay, momentum
        int centered, maximize
    ctypedef struct emb_adagrad_options:
        double eps, weight_decay
        int maximize
    enum:
        EMB_SGD_NO_MOMENTUM
        EMB_SGD_MOMENTUM
        EMB_SGD_FIRST_MOMENTUM

    void emb_sgd_f32(float* param, const float* grad, float* momentum_buffer, Py_ssize_t n,
                     const emb_sgd_options* options, int momentum_mode)
    void emb_sgd_f64(double* param, const double* grad, double* momentum_buffer, Py_ssize_t n,
                     const emb_sgd_options* options, int momentum_mode)
    void emb_adam_f32(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                      float* max_exp_avg_sq, Py_ssize_t n, const emb_adam_options* options,
                      double step_size, double bias_correction2_sqrt)
    void emb_adam_f64(double* param, const double* grad, double* exp_avg, double* exp_avg_sq,
                      double* max_exp_avg_sq, Py_ssize_t n, const emb_adam_options* options,
                      double step_size, double bias_correction2_sqrt)
    void emb_rmsprop_f32(float* param, const float* grad, float* square_avg, float* grad_avg,
                         float* momentum_buffer, Py_ssize_t n,
                         const emb_rmsprop_options* options)
    void emb_rmsprop_f64(double* param, const double* grad, double* square_avg,
                         double* grad_avg, double* momentum_buffer, Py_ssize_t n,
                         const emb_rmsprop_options* options)
    void emb_adagrad_f32(float* param, const float* grad, float* state_sum, Py_ssize_t n,
                         const emb_adagrad_options* options, double clr)
    void emb_adagrad_f64(double* param, const double* grad, double* state_sum, Py_ssize_t n,
                         const emb_adagrad_options* options, double clr)
    int emb_optim_select(int level)
    void emb_cdiv_f32_run(const float* x, float* out, Py_ssize_t n, float c)
    int emb_adam_fast

cdef int _variant = emb_optim_select(2)
_VARIANTS = ("portable", "avx2-fma", "avx512")


def _select_kernels(level=2):
    """Choose the kernel variant (tests): 0 portable, 1 at most AVX2+FMA, 2 the
    best this CPU has.  Returns the name of the one chosen."""
    global _variant
    _variant = emb_optim_select(level)
    return kernel_variant()


def _cdiv_f32(const float[::1] x not None, float c, float[::1] out not None):
    """out = x / c as the float32 Adam loops of the chosen variant compute it without a
    division (optim_simd.h's emb_cdiv_f32; tests compare it with the division)."""
    if out.shape[0] != x.shape[0]:
        raise ValueError("_cdiv_f32: x and out must have one length")
    if x.shape[0] == 0:
        return
    cdef const float* xp = &x[0]
    cdef float* op = &out[0]
    with nogil:
        emb_cdiv_f32_run(xp, op, x.shape[0], c)


def _set_adam_fast(bint on):
    """Switch the float32 Adam loops' division-free quotient and plain loop (optim_simd.h)
    off or on (A/B timing; the results are the same bits); returns the previous state."""
    global emb_adam_fast
    old = emb_adam_fast != 0
    emb_adam_fast = 1 if on else 0
    return old


def kernel_variant():
    """'avx512', 'avx2-fma' (both with fused multiply-adds, as torch's kernels
    on such CPUs) or 'portable'."""
    return _VARIANTS[_variant]


cdef enum:
    K_SGD = 0
    K_ADAM = 1
    K_RMSPROP = 2
    K_ADAGRAD = 3
    MAXBUF = 4
    # chunk length (elements) when several threads share a group
    CHUNK = 32768
    STACK_ITEMS = 32
    # elements of a 16-bit parameter widened at a time (two float32 buffers on the stack)
    HALF_BLOCK = 1024
    # Item.half
    NOT_HALF = 0
    HALF_F16 = 1
    HALF_BF16 = 2

# Below this many elements in a group one thread does everything: the fused
# updates run at a fraction of a ns per element, so smaller groups gain less
# from a second thread than a fork/join (and a busy machine) can cost.  16,384, not
# 262,144: at two threads the MLP step (85,770 Adam parameters) took 0.27 instead of
# 0.34 ms and LeNet-5's (61,706, SGD momentum) 1.35 instead of 1.61 ms
# (benchmarks/ab_step.py NET --wall optpar, load 0.7): a single-threaded update leaves
# the other OpenMP thread idle between the step's parallel GEMMs.
cdef Py_ssize_t _par_total = 16384


def _set_parallel_threshold(Py_ssize_t n):
    """Set the group size (elements) from which updates use several threads;
    returns the previous value (tests)."""
    global _par_total
    old = _par_total
    _par_total = n
    return old


# the state buffers of one parameter, by optimizer, at these indexes of Item.state
cdef enum:
    SGD_MOMENTUM_BUFFER = 0
    ADAM_EXP_AVG = 0
    ADAM_EXP_AVG_SQ = 1
    ADAM_MAX_EXP_AVG_SQ = 2
    RMSPROP_SQUARE_AVG = 0
    RMSPROP_GRAD_AVG = 1
    RMSPROP_MOMENTUM_BUFFER = 2
    ADAGRAD_SUM = 0


cdef struct Item:
    # one parameter (or a chunk of one) to update
    char* param
    char* grad
    char* state[MAXBUF]        # its state buffers (NULL where unused), at the indexes above
    Py_ssize_t n
    int f64
    int half                   # NOT_HALF, or param and grad are contiguous HALF_F16 / HALF_BF16
    # the values that depend on this parameter's own step count
    int momentum_mode          # SGD: EMB_SGD_NO_MOMENTUM / _MOMENTUM / _FIRST_MOMENTUM
    double step_size           # this step's learning rate: Adam's lr / bias_correction1,
                               # Adagrad's clr = lr / (1 + (step - 1) * lr_decay)
    double bias_correction2_sqrt   # Adam: sqrt(1 - beta2**step)


cdef void _run_half(int kind, Item* it, const void* options) noexcept nogil:
    """Update a 16-bit item a block at a time: widen the block of the parameter and of
    its gradient into float32 stack buffers, run the float32 kernel on them (the state
    is float32 already), round the parameter's block back."""
    cdef float pbuf[HALF_BLOCK]
    cdef float gbuf[HALF_BLOCK]
    cdef Item sub
    cdef Py_ssize_t start = 0, m
    cdef int b
    cdef unsigned short* p = <unsigned short*>it.param
    cdef const unsigned short* g = <const unsigned short*>it.grad
    while start < it.n:
        m = it.n - start
        if m > HALF_BLOCK:
            m = HALF_BLOCK
        sub = it[0]
        sub.half = NOT_HALF
        sub.f64 = 0
        sub.param = <char*>pbuf
        sub.grad = <char*>gbuf
        sub.n = m
        for b in range(MAXBUF):
            if it.state[b] != NULL:
                sub.state[b] = it.state[b] + start * 4
        em_widen16(it.half == HALF_BF16, p + start, pbuf, m)
        em_widen16(it.half == HALF_BF16, g + start, gbuf, m)
        _run_item(kind, &sub, options)
        em_narrow16(it.half == HALF_BF16, pbuf, p + start, m)
        start += m


cdef void _run_item(int kind, Item* it, const void* options) noexcept nogil:
    """Update one item; `options` points to the optimizer's emb_<kind>_options."""
    if it.half != NOT_HALF:
        _run_half(kind, it, options)
        return
    if kind == K_ADAM:
        if it.f64:
            emb_adam_f64(<double*>it.param, <double*>it.grad,
                         <double*>it.state[ADAM_EXP_AVG], <double*>it.state[ADAM_EXP_AVG_SQ],
                         <double*>it.state[ADAM_MAX_EXP_AVG_SQ], it.n,
                         <const emb_adam_options*>options, it.step_size,
                         it.bias_correction2_sqrt)
        else:
            emb_adam_f32(<float*>it.param, <float*>it.grad,
                         <float*>it.state[ADAM_EXP_AVG], <float*>it.state[ADAM_EXP_AVG_SQ],
                         <float*>it.state[ADAM_MAX_EXP_AVG_SQ], it.n,
                         <const emb_adam_options*>options, it.step_size,
                         it.bias_correction2_sqrt)
    elif kind == K_SGD:
        if it.f64:
            emb_sgd_f64(<double*>it.param, <double*>it.grad,
                        <double*>it.state[SGD_MOMENTUM_BUFFER], it.n,
                        <const emb_sgd_options*>options, it.momentum_mode)
        else:
            emb_sgd_f32(<float*>it.param, <float*>it.grad,
                        <float*>it.state[SGD_MOMENTUM_BUFFER], it.n,
                        <const emb_sgd_options*>options, it.momentum_mode)
    elif kind == K_RMSPROP:
        if it.f64:
            emb_rmsprop_f64(<double*>it.param, <double*>it.grad,
                            <double*>it.state[RMSPROP_SQUARE_AVG],
                            <double*>it.state[RMSPROP_GRAD_AVG],
                            <double*>it.state[RMSPROP_MOMENTUM_BUFFER], it.n,
                            <const emb_rmsprop_options*>options)
        else:
            emb_rmsprop_f32(<float*>it.param, <float*>it.grad,
                            <float*>it.state[RMSPROP_SQUARE_AVG],
                            <float*>it.state[RMSPROP_GRAD_AVG],
                            <float*>it.state[RMSPROP_MOMENTUM_BUFFER], it.n,
                            <const emb_rmsprop_options*>options)
    else:
        if it.f64:
            emb_adagrad_f64(<double*>it.param, <double*>it.grad, <double*>it.state[ADAGRAD_SUM],
                            it.n, <const emb_adagrad_options*>options, it.step_size)
        else:
            emb_adagrad_f32(<float*>it.param, <float*>it.grad, <float*>it.state[ADAGRAD_SUM],
                            it.n, <const emb_adagrad_options*>options, it.step_size)


cdef class _Work:
    """The parameters of one group that have a gradient, as raw work items."""
    cdef Item* items
    cdef Item stack[STACK_ITEMS]
    cdef Py_ssize_t n, cap, total
    cdef list keep          # objects whose memory the items point into
    cdef list copy_back     # (param, contiguous copy) pairs: non-contiguous and 16-bit params
    cdef list bump          # arrays written in place (version counters)

    def __cinit__(self):
        self.items = self.stack
        self.cap = STACK_ITEMS
        self.n = 0
        self.total = 0
        self.keep = None
        self.copy_back = None
        self.bump = []

    def __dealloc__(self):
        if self.items != self.stack:
            free(self.items)

    cdef Item* add(self) except NULL:
        cdef Item* bigger
        cdef Py_ssize_t i
        if self.n == self.cap:
            bigger = <Item*>malloc(2 * self.cap * sizeof(Item))
            if bigger == NULL:
                raise MemoryError()
            for i in range(self.n):
                bigger[i] = self.items[i]
            if self.items != self.stack:
                free(self.items)
            self.items = bigger
            self.cap *= 2
        cdef Item* it = &self.items[self.n]
        self.n += 1
        memset(it, 0, sizeof(Item))
        return it

    cdef int run(self, int kind, const void* options) except -1:
        cdef Py_ssize_t nt = num_threads()
        cdef Py_ssize_t i, j, k, nchunks, start, cnt, isz, psz
        cdef Item* work = self.items
        cdef Item* chunks = NULL
        cdef Item* src
        cdef Item* dst
        cdef int b
        if self.n == 0:
            return 0
        if nt > 1 and self.total >= _par_total:
            # a parameter listed twice must be updated twice in order: one thread
            if len({<Py_ssize_t>work[i].param for i in range(self.n)}) != self.n:
                nt = 1
        if nt <= 1 or self.total < _par_total:
            with nogil:
                for i in range(self.n):
                    if work[i].n > 0:
                        _run_item(kind, &work[i], options)
        else:
            nchunks = 0
            for i in range(self.n):
                nchunks += (work[i].n + CHUNK - 1) // CHUNK
            chunks = <Item*>malloc(nchunks * sizeof(Item))
            if chunks == NULL:
                raise MemoryError()
            k = 0
            for i in range(self.n):
                src = &work[i]
                isz = 8 if src.f64 else 4           # state: float32 for 16-bit parameters
                psz = 2 if src.half != NOT_HALF else isz
                start = 0
                while start < src.n:
                    cnt = src.n - start
                    if cnt > CHUNK:
                        cnt = CHUNK
                    dst = &chunks[k]
                    dst[0] = src[0]
                    dst.param = src.param + start * psz
                    dst.grad = src.grad + start * psz
                    for b in range(MAXBUF):
                        if src.state[b] != NULL:
                            dst.state[b] = src.state[b] + start * isz
                    dst.n = cnt
                    start += cnt
                    k += 1
            try:
                with nogil:
                    for j in prange(nchunks, schedule='dynamic', num_threads=nt):
                        _run_item(kind, &chunks[j], options)
            finally:
                free(chunks)
        return 0

    cdef finish(self):
        cdef ndarray a
        if self.copy_back is not None:
            for p, tmp in self.copy_back:
                assign(<ndarray>p, tmp)         # (rounds a 16-bit parameter's float32 copy)
                (<ndarray>p).storage.version += 1
        for a in self.bump:
            a.storage.version += 1


cdef inline str _dt(ndarray x):
    return str(DTYPE_OBJS[x.tcode])


cdef inline int _state_code(ndarray p) noexcept:
    """dtype of the update arithmetic and the state buffers: the parameter's, except
    float32 for 16-bit parameters (updated in float32 and rounded once per step)."""
    return T_FLOAT32 if is_half(p.tcode) else p.tcode


cdef ndarray _zeros_like(ndarray p):
    cdef ndarray z = new_empty(_state_code(p), p.ndim, p.shape)
    if z.size:
        memset(z.data, 0, z.size * z.itemsize)
    return z


cdef ndarray _full_like(ndarray p, double value):
    cdef ndarray z = _zeros_like(p)
    cdef Py_ssize_t i
    if value != 0.0:
        if z.tcode == T_FLOAT32:
            for i in range(z.size):
                (<float*>z.data)[i] = <float>value
        else:
            for i in range(z.size):
                (<double*>z.data)[i] = value
    return z


cdef ndarray _new_step(double value=0.0):
    """A 0-d step counter, float32 (float64 under a float64 default dtype) as torch's."""
    cdef Py_ssize_t dummy = 0
    cdef int code = T_FLOAT64 if default_float == T_FLOAT64 else T_FLOAT32
    cdef ndarray s = new_empty(code, 0, &dummy)
    if code == T_FLOAT32:
        (<float*>s.data)[0] = <float>value
    else:
        (<double*>s.data)[0] = value
    return s


cdef double _bump_step(dict st, str opname, Py_ssize_t index) except? -1.0:
    """state['step'] += 1 (in its own dtype, as torch's float tensor); returns it."""
    cdef object s = st.get("step")
    cdef ndarray a
    cdef float f
    if isinstance(s, ndarray) and (<ndarray>s).storage.device_index < 0:   # on the host
        a = <ndarray>s
        if a.size == 1 and a.tcode == T_FLOAT32:
            f = (<float*>a.data)[0] + 1.0
            (<float*>a.data)[0] = f
            a.storage.version += 1
            return f
        if a.size == 1 and a.tcode == T_FLOAT64:
            (<double*>a.data)[0] += 1.0
            a.storage.version += 1
            return (<double*>a.data)[0]
        s = float(a.item())
    if s is None:
        s = 0.0
    try:
        s = float(s)
    except (TypeError, ValueError):
        raise TypeError(f"{opname}: state['step'] of parameter {index} must be a number or a "
                        f"one-element array, got {type(s).__name__}") from None
    a = _new_step(s + 1.0)
    st["step"] = a
    return a.item()


cdef ndarray _check_param(object p, str opname, Py_ssize_t index):
    if not isinstance(p, ndarray):
        raise TypeError(f"{opname}: parameter {index} is not an ember array "
                        f"(got {type(p).__name__})")
    cdef ndarray a = <ndarray>p
    if a.tcode != T_FLOAT32 and a.tcode != T_FLOAT64 and not is_half(a.tcode):
        raise TypeError(f"{opname}: parameter {index} has dtype {_dt(a)}; only floating "
                        f"parameters (float16, bfloat16, float32, float64) are supported")
    if a.readonly:
        raise ValueError(f"{opname}: parameter {index} is read-only")
    return a


cdef ndarray _check_grad(ndarray p, object g, str opname, Py_ssize_t index):
    if not isinstance(g, ndarray):
        raise TypeError(f"{opname}: the .grad of parameter {index} is not an ember array "
                        f"(got {type(g).__name__})")
    cdef ndarray ga = <ndarray>g
    if ga.storage.device_index != p.storage.device_index:
        raise RuntimeError(f"{opname}: parameter {index} is on {(<object>p).device} but its .grad is on "
                           f"{(<object>ga).device}; they must be on the same device")
    if ga.tcode != p.tcode:
        raise TypeError(f"{opname}: parameter {index} has dtype {_dt(p)} but its .grad has "
                        f"dtype {_dt(ga)}; they must match")
    cdef int d
    cdef bint same = ga.ndim == p.ndim
    if same:
        for d in range(p.ndim):
            if ga.shape[d] != p.shape[d]:
                same = False
                break
    if not same:
        raise ValueError(f"{opname}: parameter {index} has shape {shape_tuple(p)} but its "
                         f".grad has shape {shape_tuple(ga)}; they must match")
    return ga


cdef ndarray _check_buf(ndarray p, object b, str name, str opname, Py_ssize_t index):
    if not isinstance(b, ndarray):
        raise TypeError(f"{opname}: state[{name!r}] of parameter {index} is not an ember array "
                        f"(got {type(b).__name__})")
    cdef ndarray ba = <ndarray>b
    if ba.tcode != _state_code(p) or ba.size != p.size or not ba.c_contig or ba.readonly:
        raise ValueError(f"{opname}: state[{name!r}] of parameter {index} must be a writable "
                         f"C-contiguous {DTYPE_OBJS[_state_code(p)]} array of {p.size} "
                         f"elements like the parameter, got {_dt(ba)} with shape "
                         f"{shape_tuple(ba)}")
    return ba


cdef dict _get_state(object state, dict data, ndarray p):
    """state[p] (created empty when missing), through the id-keyed table."""
    cdef PyObject* o = PyDict_GetItem(data, PyLong_FromVoidPtr(<void*>p))
    cdef dict st
    if o == NULL:
        st = {}
        state[p] = st
        return st
    if type(<object>o) is dict:
        return <dict>o
    st = dict(<object>o)
    state[p] = st
    return st


cdef inline bint _overlap(ndarray a, ndarray b) noexcept:
    """Whether two C-contiguous arrays' memory overlaps."""
    return a.data < b.data + b.size * b.itemsize and b.data < a.data + a.size * a.itemsize


cdef int _fill(_Work w, Item* it, ndarray p, ndarray g) except -1:
    """Point the item at p and g (contiguous copies where needed)."""
    cdef ndarray pc = p, gc = g
    if is_half(p.tcode) and p.c_contig and g.c_contig and not _overlap(p, g):
        # updated in place a block at a time (_run_half)
        w.bump.append(p)
        it.param = p.data
        it.grad = g.data
        it.n = p.size
        it.f64 = 0
        it.half = HALF_BF16 if p.tcode == T_BFLOAT16 else HALF_F16
        w.total += p.size
        return 0
    if is_half(p.tcode):
        # 16-bit parameters: the kernels update a float32 copy, rounded back in finish()
        pc = cast(p, T_FLOAT32)
        if w.copy_back is None:
            w.copy_back = []
        w.copy_back.append((p, pc))
        gc = cast(g, T_FLOAT32)
        if w.keep is None:
            w.keep = []
        w.keep.append(gc)
    elif not p.c_contig:
        pc = _wrap(_np.ascontiguousarray(_numpy_view(p)))
        if w.copy_back is None:
            w.copy_back = []
        w.copy_back.append((p, pc))
    else:
        w.bump.append(p)
    if not g.c_contig and not is_half(p.tcode):
        gc = _wrap(_np.ascontiguousarray(_numpy_view(g)))
        if w.keep is None:
            w.keep = []
        w.keep.append(gc)
    it.param = pc.data
    it.grad = gc.data
    it.n = p.size
    it.f64 = pc.tcode == T_FLOAT64
    w.total += p.size
    return 0


def sgd_group(list params not None, object state, double lr, double momentum, double dampening,
              double weight_decay, bint nesterov, bint maximize, str opname="SGD"):
    """One SGD step over a parameter group (see ember.optim.SGD)."""
    cdef _Work w = _Work()
    cdef emb_sgd_options options
    cdef Py_ssize_t i
    cdef ndarray p, g, buf
    cdef Item* it
    cdef dict data = state._data if momentum != 0 else None
    cdef dict st
    cdef object b
    options.lr = lr
    options.momentum = momentum
    options.dampening = dampening
    options.weight_decay = weight_decay
    options.nesterov = nesterov
    options.maximize = maximize
    for i in range(len(params)):
        po = params[i]
        go = (<ndarray>po).grad if isinstance(po, ndarray) else getattr(po, "grad", None)
        if go is None:
            continue
        p = _check_param(po, opname, i)
        g = _check_grad(p, go, opname, i)
        it = w.add()
        _fill(w, it, p, g)
        if momentum != 0:
            st = _get_state(state, data, p)
            b = st.get("momentum_buffer")
            if b is None:
                buf = _zeros_like(p)
                st["momentum_buffer"] = buf
                it.momentum_mode = EMB_SGD_FIRST_MOMENTUM
            else:
                buf = _check_buf(p, b, "momentum_buffer", opname, i)
                it.momentum_mode = EMB_SGD_MOMENTUM
            it.state[SGD_MOMENTUM_BUFFER] = buf.data
            w.bump.append(buf)
    w.run(K_SGD, &options)
    w.finish()


def adam_group(list params not None, object state, double lr, double beta1, double beta2, double eps,
               double weight_decay, bint amsgrad, bint maximize, bint decoupled,
               str opname="Adam"):
    """One Adam/AdamW step over a parameter group (see ember.optim.Adam)."""
    cdef _Work w = _Work()
    cdef emb_adam_options options
    cdef Py_ssize_t i
    cdef ndarray p, g, m, v, vm
    cdef Item* it
    cdef dict data = state._data
    cdef dict st
    cdef double step, bias_correction1, bias_correction2
    cdef object o
    cdef list counted = []
    cdef Py_ssize_t j
    options.lr = lr
    options.beta1 = beta1
    options.beta2 = beta2
    options.eps = eps
    options.weight_decay = weight_decay
    options.amsgrad = amsgrad
    options.maximize = maximize
    options.decoupled_weight_decay = decoupled
    for i in range(len(params)):
        po = params[i]
        go = (<ndarray>po).grad if isinstance(po, ndarray) else getattr(po, "grad", None)
        if go is None:
            continue
        p = _check_param(po, opname, i)
        g = _check_grad(p, go, opname, i)
        st = _get_state(state, data, p)
        if len(st) == 0:
            st["step"] = _new_step()
            st["exp_avg"] = _zeros_like(p)
            st["exp_avg_sq"] = _zeros_like(p)
            if amsgrad:
                st["max_exp_avg_sq"] = _zeros_like(p)
        it = w.add()
        _fill(w, it, p, g)
        o = st.get("exp_avg")
        m = _check_buf(p, o, "exp_avg", opname, i)
        o = st.get("exp_avg_sq")
        v = _check_buf(p, o, "exp_avg_sq", opname, i)
        it.state[ADAM_EXP_AVG] = m.data
        it.state[ADAM_EXP_AVG_SQ] = v.data
        w.bump.append(m)
        w.bump.append(v)
        if amsgrad:
            o = st.get("max_exp_avg_sq")
            if o is None:
                o = _zeros_like(p)
                st["max_exp_avg_sq"] = o
            vm = _check_buf(p, o, "max_exp_avg_sq", opname, i)
            it.state[ADAM_MAX_EXP_AVG_SQ] = vm.data
            w.bump.append(vm)
        counted.append((st, i))
    # all checks passed: count the steps (torch's float step += 1) and compute
    # the bias corrections in double precision, as torch's Python code does
    for j in range(w.n):
        st, i = counted[j]
        step = _bump_step(<dict>st, opname, i)
        bias_correction1 = 1.0 - pow(beta1, step)
        bias_correction2 = 1.0 - pow(beta2, step)
        w.items[j].step_size = lr / bias_correction1
        w.items[j].bias_correction2_sqrt = pow(bias_correction2, 0.5)
    w.run(K_ADAM, &options)
    w.finish()


def rmsprop_group(list params not None, object state, double lr, double alpha, double eps,
                  double weight_decay, double momentum, bint centered, bint maximize,
                  str opname="RMSprop"):
    """One RMSprop step over a parameter group (see ember.optim.RMSprop)."""
    cdef _Work w = _Work()
    cdef emb_rmsprop_options options
    cdef Py_ssize_t i
    cdef ndarray p, g, sq, ga, buf
    cdef Item* it
    cdef dict data = state._data
    cdef dict st
    cdef object o
    cdef list counted = []
    cdef Py_ssize_t j
    options.lr = lr
    options.alpha = alpha
    options.eps = eps
    options.weight_decay = weight_decay
    options.momentum = momentum
    options.centered = centered
    options.maximize = maximize
    for i in range(len(params)):
        po = params[i]
        go = (<ndarray>po).grad if isinstance(po, ndarray) else getattr(po, "grad", None)
        if go is None:
            continue
        p = _check_param(po, opname, i)
        g = _check_grad(p, go, opname, i)
        st = _get_state(state, data, p)
        if len(st) == 0:
            st["step"] = _new_step()
            st["square_avg"] = _zeros_like(p)
            if momentum > 0:
                st["momentum_buffer"] = _zeros_like(p)
            if centered:
                st["grad_avg"] = _zeros_like(p)
        it = w.add()
        _fill(w, it, p, g)
        sq = _check_buf(p, st.get("square_avg"), "square_avg", opname, i)
        it.state[RMSPROP_SQUARE_AVG] = sq.data
        w.bump.append(sq)
        if centered:
            o = st.get("grad_avg")
            if o is None:
                o = _zeros_like(p)
                st["grad_avg"] = o
            ga = _check_buf(p, o, "grad_avg", opname, i)
            it.state[RMSPROP_GRAD_AVG] = ga.data
            w.bump.append(ga)
        if momentum > 0:
            o = st.get("momentum_buffer")
            if o is None:
                o = _zeros_like(p)
                st["momentum_buffer"] = o
            buf = _check_buf(p, o, "momentum_buffer", opname, i)
            it.state[RMSPROP_MOMENTUM_BUFFER] = buf.data
            w.bump.append(buf)
        counted.append((st, i))
    for st, i in counted:
        _bump_step(<dict>st, opname, i)
    w.run(K_RMSPROP, &options)
    w.finish()


def adagrad_group(list params not None, object state, double lr, double lr_decay, double eps,
                  double weight_decay, double initial_accumulator_value, bint maximize,
                  str opname="Adagrad"):
    """One Adagrad step over a parameter group (see ember.optim.Adagrad)."""
    cdef _Work w = _Work()
    cdef emb_adagrad_options options
    cdef Py_ssize_t i
    cdef ndarray p, g, s
    cdef Item* it
    cdef dict data = state._data
    cdef dict st
    cdef double step
    cdef list counted = []
    cdef Py_ssize_t j
    options.eps = eps
    options.weight_decay = weight_decay
    options.maximize = maximize
    for i in range(len(params)):
        po = params[i]
        go = (<ndarray>po).grad if isinstance(po, ndarray) else getattr(po, "grad", None)
        if go is None:
            continue
        p = _check_param(po, opname, i)
        g = _check_grad(p, go, opname, i)
        st = _get_state(state, data, p)
        if len(st) == 0:
            init_state_adagrad(p, st, initial_accumulator_value)
        it = w.add()
        _fill(w, it, p, g)
        s = _check_buf(p, st.get("sum"), "sum", opname, i)
        it.state[ADAGRAD_SUM] = s.data
        w.bump.append(s)
        counted.append((st, i))
    for j in range(w.n):
        st, i = counted[j]
        step = _bump_step(<dict>st, opname, i)
        w.items[j].step_size = lr / (1.0 + (step - 1.0) * lr_decay)     # clr
    w.run(K_ADAGRAD, &options)
    w.finish()


cpdef init_state_adagrad(object p, dict st, double initial_accumulator_value):
    """Adagrad's eager state: step 0 and sum filled with initial_accumulator_value."""
    if st is None:
        raise TypeError("Adagrad: the parameter state must be a dict, not None")
    if not isinstance(p, ndarray):
        raise TypeError(f"Adagrad: parameters must be ember arrays, got {type(p).__name__}")
    cdef ndarray a = <ndarray>p
    st["step"] = _new_step()
    if a.tcode == T_FLOAT32 or a.tcode == T_FLOAT64 or is_half(a.tcode):
        st["sum"] = _full_like(a, initial_accumulator_value)
    else:
        raise TypeError(f"Adagrad: parameter has dtype {_dt(a)}; only float32 and float64 "
                        f"parameters are supported")


def new_step(double value=0.0):
    """A fresh 0-d step counter holding value."""
    return _new_step(value)


def bump_step(dict st not None, str opname, Py_ssize_t index):
    """``st['step'] += 1`` (a host 0-d float array, in its own dtype, as PyTorch's
    step tensor; created when missing); returns the new count.  The same counting
    for the GPU path (ember.optim._gpu)."""
    return _bump_step(st, opname, index)


def check_param_and_grad(object p, object g, str opname, Py_ssize_t index, bint on_gpu):
    """The checks of one parameter of a group and of its ``.grad`` before a fused step
    (shared by the CPU kernels here and the GPU path, ember.optim._gpu): an ember
    array of a floating dtype, writable, on a GPU when ``on_gpu`` else on the host;
    its gradient an ember array of the same device, dtype and shape.  Returns the
    gradient; raises TypeError, ValueError or RuntimeError naming the optimizer, the
    parameter's index and what is wrong."""
    cdef ndarray a = _check_param(p, opname, index)
    if (a.storage.device_index >= 0) != on_gpu:
        raise RuntimeError(f"{opname}: parameter {index} is on {(<object>a).device} but other parameters "
                           f"of its group are on {'a GPU' if on_gpu else 'the CPU'}; a group's "
                           f"parameters must share a device (move them with module.to(device) "
                           f"before making the optimizer)")
    return _check_grad(a, g, opname, index)
