"""Recurrent layers: RNN (tanh / relu), LSTM (optional projections), GRU and their cells.

Parameter names, shapes, gate order and initialisation are PyTorch's, so a
PyTorch ``state_dict`` loads as is.  PackedSequence (variable-length batches) is
not supported: pad the batch and mask the outputs instead.

How it runs: each (layer, direction) is ONE autograd node.  Its forward projects
the whole input sequence with a single GEMM (``x @ W_ih^T`` for every time step
at once), then loops over time doing ``h @ W_hh^T`` plus the gate arithmetic on
NumPy views of ember's memory (no per-step graph recording); it keeps the gate
activations for the backward, which is backpropagation through time in the same
style and ends with one GEMM each for ``dW_ih``, ``dW_hh`` and the input gradient.
When a backward runs with ``create_graph=True``, the node's rule recomputes the
layer with ember operations instead, so higher-order gradients are exact too.
"""
import math
import numbers
import warnings

import numpy as np

import ember as E
from ember._core.array import ndarray
from ember._core.dtypes import is_half_dtype
from ember._api._util import numpy_view, wrap
from ember._kernels.cpu.gemm import matmul_new as _gemm_new
from ember.autograd.registry import defop
from ember.nn.parameter import Parameter
from ember.nn.modules.module import Module

# the functions here run unchanged on GPU arrays (views, ember ops, fresh arrays): the GPU
# dispatch (ember/cuda/_dispatch.py) runs them there when no GPU kernel is registered
DEVICE_GENERIC = True

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


# ------------------------------------------------------------------ array backends
# The layer code below is written once against these two tiny backends: NumPy
# (fast, nothing recorded: the forward and first-order backward) and ember
# (every op recorded: the create_graph recomputation).

def _np_sigmoid(x):
    try:
        from scipy.special import expit
    except ImportError:                      # pragma: no cover
        expit = None
    if expit is not None:
        _NP.sigmoid = staticmethod(expit)
        return expit(x)
    r = np.negative(x)
    np.exp(r, out=r)
    r += 1
    return np.reciprocal(r, out=r)


class _NP:
    matmul = staticmethod(_gemm_new)         # ember's threads, not OpenBLAS's pool
    tanh = staticmethod(np.tanh)
    sigmoid = staticmethod(_np_sigmoid)
    stack = staticmethod(np.stack)
    concat = staticmethod(np.concatenate)

    @staticmethod
    def relu(x):
        return np.maximum(x, 0)

    @staticmethod
    def zeros(shape, dtype):
        return np.zeros(shape, dtype)


def _em_sigmoid(x):
    from ember.nn import functional as F
    sig = getattr(F, "sigmoid", None)
    if sig is not None:
        return sig(x)
    return 1.0 / (1.0 + E.exp(-x))


class _EM:
    matmul = staticmethod(E.matmul)
    tanh = staticmethod(E.tanh)
    sigmoid = staticmethod(_em_sigmoid)
    stack = staticmethod(E.stack)
    concat = staticmethod(E.concatenate)

    @staticmethod
    def relu(x):
        return E.maximum(x, 0)

    @staticmethod
    def zeros(shape, dtype):
        return E.zeros(shape, dtype=dtype)     # the default device: the op's GPU inside GPU ops


# ------------------------------------------------------------------ one layer, one direction

_NGATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _forward(B, mode, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse, bf):
    """Run one layer in one direction.  x: (T, N, I), or (N, T, I) when bf.

    Returns (out, h_n) for RNN, (out, h_n, rz, n, ghn) for GRU,
    (out, h_n, c_n, sig, g, c, tanh_c[, h_raw]) for LSTM; the arrays after
    h_n / c_n are the workspace of the backward, stacked along the time axis."""
    ta = 1 if bf else 0
    T = x.shape[ta]
    I = x.shape[2]
    G = w_ih.shape[0]
    H = G // _NGATES[mode]
    xw = B.matmul(x.reshape(-1, I), w_ih.T)
    if b_ih is not None:
        xw = xw + (b_ih if mode == "GRU" else b_ih + b_hh)
    xw = xw.reshape(x.shape[0], x.shape[1], G)
    whhT = w_hh.T
    order = range(T - 1, -1, -1) if reverse else range(T)
    hs = [None] * T
    h = h0
    if mode == "LSTM":
        whrT = w_hr.T if w_hr is not None else None
        sigs, gs, cs, tcs, hrs = [None] * T, [None] * T, [None] * T, [None] * T, [None] * T
        c = c0
        for t in order:
            gates = (xw[:, t] if bf else xw[t]) + B.matmul(h, whhT)
            s = B.sigmoid(gates)
            g = B.tanh(gates[:, 2 * H:3 * H])
            c = s[:, H:2 * H] * c + s[:, :H] * g
            tc = B.tanh(c)
            hr = s[:, 3 * H:] * tc
            h = B.matmul(hr, whrT) if whrT is not None else hr
            hs[t], sigs[t], gs[t], cs[t], tcs[t], hrs[t] = h, s, g, c, tc, hr
        res = (B.stack(hs, axis=ta), h, c, B.stack(sigs, axis=ta), B.stack(gs, axis=ta),
               B.stack(cs, axis=ta), B.stack(tcs, axis=ta))
        if w_hr is not None:
            res = res + (B.stack(hrs, axis=ta),)
        return res
    if mode == "GRU":
        rzs, ns, ghns = [None] * T, [None] * T, [None] * T
        for t in order:
            gx = xw[:, t] if bf else xw[t]
            gh = B.matmul(h, whhT)
            if b_hh is not None:
                gh = gh + b_hh
            rz = B.sigmoid(gx[:, :2 * H] + gh[:, :2 * H])
            ghn = gh[:, 2 * H:]
            n = B.tanh(gx[:, 2 * H:] + rz[:, :H] * ghn)
            h = n + rz[:, H:] * (h - n)
            hs[t], rzs[t], ns[t], ghns[t] = h, rz, n, ghn
        return (B.stack(hs, axis=ta), h, B.stack(rzs, axis=ta), B.stack(ns, axis=ta),
                B.stack(ghns, axis=ta))
    act = B.tanh if mode == "RNN_TANH" else B.relu
    for t in order:
        h = act((xw[:, t] if bf else xw[t]) + B.matmul(h, whhT))
        hs[t] = h
    return (B.stack(hs, axis=ta), h)


def _backward(B, g, res, mode, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse, bf,
              need_dx=True):
    """Backpropagation through time for `_forward`; g: gradients of its outputs."""
    ta = 1 if bf else 0
    T = x.shape[ta]
    G = w_ih.shape[0]
    H = G // _NGATES[mode]
    out = res[0]
    g_out, dh = g[0], g[1]
    if dh is None:
        dh = B.zeros(h0.shape, h0.dtype)
    order = range(T) if reverse else range(T - 1, -1, -1)

    def at(a, t):
        return a[:, t] if bf else a[t]

    def prev(a, a0, t):                  # the state before step t (a0 at the first step)
        if reverse:
            return a0 if t == T - 1 else at(a, t + 1)
        return a0 if t == 0 else at(a, t - 1)

    dps = [None] * T                     # gradient of the pre-activation gates
    dphs = None                          # GRU: the part that goes to W_hh / b_hh
    dhs = None                           # LSTM with projections: gradient of h (for W_hr)
    if mode == "LSTM":
        sig, gg, cc, tcc = res[3], res[4], res[5], res[6]
        dc = g[2] if g[2] is not None else B.zeros(c0.shape, c0.dtype)
        if w_hr is not None:
            dhs = [None] * T
        for t in order:
            if g_out is not None:
                dh = dh + at(g_out, t)
            s, gt, tc = at(sig, t), at(gg, t), at(tcc, t)
            i, f, o = s[:, :H], s[:, H:2 * H], s[:, 3 * H:]
            if w_hr is not None:
                dhs[t] = dh
                dh = B.matmul(dh, w_hr)
            dc = dc + dh * o * (1 - tc * tc)
            dp = B.concat([dc * gt * i * (1 - i), dc * prev(cc, c0, t) * f * (1 - f),
                           dc * i * (1 - gt * gt), dh * tc * o * (1 - o)], axis=1)
            dc = dc * f
            dh = B.matmul(dp, w_hh)
            dps[t] = dp
    elif mode == "GRU":
        rzs, ns, ghns = res[2], res[3], res[4]
        dphs = [None] * T
        for t in order:
            if g_out is not None:
                dh = dh + at(g_out, t)
            rz, n, ghn = at(rzs, t), at(ns, t), at(ghns, t)
            r, z = rz[:, :H], rz[:, H:]
            dpn = dh * (1 - z) * (1 - n * n)
            drz = B.concat([dpn * ghn, dh * (prev(out, h0, t) - n)], axis=1) * rz * (1 - rz)
            dps[t] = B.concat([drz, dpn], axis=1)
            dph = B.concat([drz, dpn * r], axis=1)
            dphs[t] = dph
            dh = dh * z + B.matmul(dph, w_hh)
    else:
        for t in order:
            if g_out is not None:
                dh = dh + at(g_out, t)
            h = at(out, t)
            dp = dh * (1 - h * h) if mode == "RNN_TANH" else dh * (h > 0)
            dh = B.matmul(dp, w_hh)
            dps[t] = dp

    # the weight and input gradients: one GEMM each over all time steps
    dP = B.stack(dps, axis=ta).reshape(-1, G)
    dPh = dP if dphs is None else B.stack(dphs, axis=ta).reshape(-1, G)
    n_b = x.shape[1 - ta]
    h0e = h0.reshape((n_b, 1, -1) if bf else (1, n_b, -1))
    if T == 1:
        hprev = h0e
    elif reverse:
        hprev = B.concat([out[:, 1:] if bf else out[1:], h0e], axis=ta)
    else:
        hprev = B.concat([h0e, out[:, :-1] if bf else out[:-1]], axis=ta)
    I = x.shape[2]
    dx = None
    if need_dx:
        dx = B.matmul(dP, w_ih).reshape(x.shape)
    dw_ih = B.matmul(dP.T, x.reshape(-1, I))
    dw_hh = B.matmul(dPh.T, hprev.reshape(-1, hprev.shape[2]))
    db_ih = db_hh = None
    if b_ih is not None:
        db_ih = dP.sum(axis=0)
        db_hh = db_ih if dphs is None else dPh.sum(axis=0)
    dw_hr = None
    if dhs is not None:
        hr = res[7]
        dw_hr = B.matmul(B.stack(dhs, axis=ta).reshape(-1, w_hr.shape[0]).T,
                         hr.reshape(-1, hr.shape[2]))
    dc0 = dc if mode == "LSTM" else None
    return dx, dh, dc0, dw_ih, dw_hh, db_ih, db_hh, dw_hr


def _np(a):
    return None if a is None else numpy_view(a)


def _rnn_layer_grad(g, res, mode, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse, bf):
    arrays = (x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr)
    if not E.is_grad_enabled() and x.is_cuda:
        # a GPU layer: the same backpropagation through time with ember ops on the GPU
        grads = _backward(_EM, g, res, mode, *arrays, reverse, bf, need_dx=x.requires_grad)
    elif E.is_grad_enabled():
        # create_graph: recompute the layer with recorded ember ops, then run the same
        # backpropagation through time with ember ops, so the gradients are differentiable
        res = _forward(_EM, mode, *arrays, reverse, bf)
        grads = _backward(_EM, g, res, mode, *arrays, reverse, bf, need_dx=x.requires_grad)
    else:
        gn = tuple(None if a is None else numpy_view(E.ascontiguousarray(a)) for a in g)
        rn = tuple(numpy_view(a) for a in res)
        grads = _backward(_NP, gn, rn, mode, *(_np(a) for a in arrays), reverse, bf,
                          need_dx=x.requires_grad)
        grads = tuple(None if d is None else wrap(np.ascontiguousarray(d)) for d in grads)
    return (None,) + tuple(grads)


@defop("nn.modules.rnn._rnn_layer", grad=_rnn_layer_grad, save_args=True, save_result=True)
def _rnn_layer(mode, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse, bf):
    """One recurrent layer in one direction as a single autograd node (see `_forward`)."""
    if x.shape[1 if bf else 0] == 0:
        raise ValueError(f"{mode}: the input sequence is empty (shape {tuple(x.shape)})")
    if x.is_cuda:
        # GPU arrays: the same recurrence with ember ops (each step runs on the GPU)
        return tuple(E.ascontiguousarray(a) for a in
                     _forward(_EM, mode, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse, bf))
    res = _forward(_NP, mode, *(_np(a) for a in (x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr)),
                   reverse, bf)
    return tuple(wrap(np.ascontiguousarray(a)) for a in res)


# ------------------------------------------------------------------ modules

def _check_hidden(hx, expected, what):
    if tuple(hx.shape) != tuple(expected):
        raise RuntimeError(f"Expected {what} size {tuple(expected)}, got {tuple(hx.shape)}")


class RNNBase(Module):
    """Base class of RNN, LSTM and GRU (PyTorch's parameters, names and initialisation).

    PackedSequence inputs are not supported (pad the batch instead).

    >>> import ember
    >>> from ember import nn
    >>> m = nn.RNNBase("GRU", 4, 8)
    >>> out, h = m(ember.ones((5, 2, 4)))
    >>> out.shape, h.shape
    ((5, 2, 8), (1, 2, 8))
    """

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        if mode not in _NGATES:
            raise ValueError(f"Unrecognized RNN mode: {mode!r}")
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) \
                or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=2)
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool):
            raise TypeError(f"hidden_size should be of type int, got: "
                            f"{type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if not isinstance(input_size, int) or input_size < 0:
            raise ValueError(f"input_size must be a non-negative integer, got {input_size!r}")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        num_directions = 2 if bidirectional else 1
        gate_size = _NGATES[mode] * hidden_size
        dt = dtype if dtype is not None else E.get_default_dtype()
        self._flat_weights_names = []
        self._all_weights = []
        real_hidden = proj_size if proj_size > 0 else hidden_size
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input = input_size if layer == 0 else real_hidden * num_directions
                suffix = "_reverse" if direction == 1 else ""
                names = [f"weight_ih_l{layer}{suffix}", f"weight_hh_l{layer}{suffix}"]
                shapes = [(gate_size, layer_input), (gate_size, real_hidden)]
                if bias:
                    names += [f"bias_ih_l{layer}{suffix}", f"bias_hh_l{layer}{suffix}"]
                    shapes += [(gate_size,), (gate_size,)]
                if proj_size > 0:
                    names.append(f"weight_hr_l{layer}{suffix}")
                    shapes.append((proj_size, hidden_size))
                for n, s in zip(names, shapes):
                    setattr(self, n, Parameter(E.empty(s, dtype=dt)))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self):
        from ember.nn import init
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def flatten_parameters(self):
        """A no-op kept for PyTorch compatibility (there is no cuDNN weight buffer)."""

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        nl = getattr(self, "nonlinearity", None)
        if nl is not None and nl != "tanh":
            s += f", nonlinearity={nl!r}"
        return s

    def _layer_params(self, idx):
        names = self._all_weights[idx]
        w_ih, w_hh = getattr(self, names[0]), getattr(self, names[1])
        b_ih = b_hh = w_hr = None
        k = 2
        if self.bias:
            b_ih, b_hh = getattr(self, names[2]), getattr(self, names[3])
            k = 4
        if self.proj_size > 0:
            w_hr = getattr(self, names[k])
        return w_ih, w_hh, b_ih, b_hh, w_hr

    def _run(self, input, hx, cx):
        """input (T, N, I) or (N, T, I); hx/cx (L*D, N, H) -> out, h_n, c_n."""
        from ember.nn import functional as F
        D = 2 if self.bidirectional else 1
        bf = self.batch_first
        # 16-bit floats on the CPU run the recurrence in float32 and round the results
        # once (NumPy's loops would compute in bfloat16 and hand float32 back)
        narrow = input.dtype if is_half_dtype(input.dtype) and not input.is_cuda else None
        widen = (lambda a: a if a is None else a.astype(np.float32)) if narrow is not None \
            else (lambda a: a)
        x, hx, cx = widen(input), widen(hx), widen(cx)
        hn, cn = [], []
        mode = self.mode
        for layer in range(self.num_layers):
            outs = []
            for d in range(D):
                idx = layer * D + d
                w_ih, w_hh, b_ih, b_hh, w_hr = map(widen, self._layer_params(idx))
                res = _rnn_layer(mode, x, hx[idx], None if cx is None else cx[idx], w_ih, w_hh,
                                 b_ih, b_hh, w_hr, d == 1, bf)
                outs.append(res[0])
                hn.append(res[1])
                if cx is not None:
                    cn.append(res[2])
            x = outs[0] if D == 1 else E.concatenate(outs, axis=2)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, p=self.dropout, training=True)
        res = (x, E.stack(hn, axis=0), (E.stack(cn, axis=0) if cx is not None else None))
        if narrow is not None:
            res = tuple(r if r is None else r.astype(narrow) for r in res)
        return res

    def _prepare(self, input, hx, name):
        """Checks; returns (input 3-d, hx (tuple or array) 3-d, is_batched)."""
        if not isinstance(input, ndarray):
            input = E.asarray(input)
        if input.ndim not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.ndim}D "
                             f"instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"{name}: input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")
        w = getattr(self, self._flat_weights_names[0])
        if input.dtype != w.dtype:
            raise TypeError(f"{name}: input must have the same dtype as the weights "
                            f"({w.dtype}), got {input.dtype}")
        is_batched = input.ndim == 3
        if not is_batched:
            input = input[:, None] if not self.batch_first else input[None]
        return input, is_batched

    def _hidden(self, hx, input, is_batched, size, what, name):
        D = 2 if self.bidirectional else 1
        n = input.shape[0 if self.batch_first else 1]
        expected = (self.num_layers * D, n, size)
        if hx is None:
            return E.zeros(expected, dtype=input.dtype, device=input.device)
        if not isinstance(hx, ndarray):
            hx = E.asarray(hx)
        if is_batched and hx.ndim != 3:
            raise RuntimeError(f"{name}: for batched 3-D input, {what} should also be 3-D but "
                               f"got {hx.ndim}-D array")
        if not is_batched:
            if hx.ndim != 2:
                raise RuntimeError(f"{name}: for unbatched 2-D input, {what} should also be "
                                   f"2-D but got {hx.ndim}-D array")
            hx = hx[:, None]
        if hx.dtype != input.dtype:
            raise TypeError(f"{name}: {what} must have dtype {input.dtype}, got {hx.dtype}")
        _check_hidden(hx, expected, "hidden" if what == "hx" else "cell")
        return hx

    def _finish(self, out, is_batched):
        if not is_batched:
            out = out[:, 0] if not self.batch_first else out[0]
        return out

    def forward(self, input, hx=None):
        name = type(self).__name__
        input, is_batched = self._prepare(input, hx, name)
        Hout = self.proj_size if self.proj_size > 0 else self.hidden_size
        if self.mode == "LSTM":
            if hx is None:
                h0 = self._hidden(None, input, is_batched, Hout, "hx", name)
                c0 = self._hidden(None, input, is_batched, self.hidden_size, "cx", name)
            else:
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise TypeError(f"{name}: hx must be a tuple (h_0, c_0)")
                h0 = self._hidden(hx[0], input, is_batched, Hout, "hx", name)
                c0 = self._hidden(hx[1], input, is_batched, self.hidden_size, "cx", name)
            out, hn, cn = self._run(input, h0, c0)
            if not is_batched:
                hn, cn = hn[:, 0], cn[:, 0]
            return self._finish(out, is_batched), (hn, cn)
        h0 = self._hidden(hx, input, is_batched, Hout, "hx", name)
        out, hn, _ = self._run(input, h0, None)
        if not is_batched:
            hn = hn[:, 0]
        return self._finish(out, is_batched), hn


class RNN(RNNBase):
    """Elman RNN: ``h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)``, act tanh or relu.

    Arguments as PyTorch's: input_size, hidden_size, num_layers=1, nonlinearity='tanh',
    bias=True, batch_first=False, dropout=0.0 (between layers, in training),
    bidirectional=False.  ``forward(input, hx=None)`` with input ``(L, N, H_in)``
    (``(N, L, H_in)`` if batch_first, or unbatched ``(L, H_in)``) returns
    ``(output, h_n)``.  PackedSequence is not supported.

    >>> import ember
    >>> from ember import nn
    >>> rnn = nn.RNN(10, 20, 2)
    >>> out, hn = rnn(ember.ones((5, 3, 10)))
    >>> out.shape, hn.shape
    ((5, 3, 20), (2, 3, 20))
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            kwargs["nonlinearity"] = args[3]
            args = args[:3] + args[4:]
        self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' "
                             f"or 'relu'.")
        super().__init__(mode, *args, **kwargs)
        self.nonlinearity = "tanh" if mode == "RNN_TANH" else "relu"


class LSTM(RNNBase):
    """Long short-term memory (gates i, f, g, o in PyTorch's order), optional projections.

    ``forward(input, (h_0, c_0)=None)`` returns ``(output, (h_n, c_n))``; with
    ``proj_size > 0`` the hidden state is projected by ``weight_hr_l{k}``.
    PackedSequence is not supported.

    >>> import ember
    >>> from ember import nn
    >>> lstm = nn.LSTM(10, 20, 2, bidirectional=True)
    >>> out, (hn, cn) = lstm(ember.ones((5, 3, 10)))
    >>> out.shape, hn.shape, cn.shape
    ((5, 3, 40), (4, 3, 20), (4, 3, 20))
    """

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """Gated recurrent unit (gates r, z, n in PyTorch's order).

    ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) * n + z * h``.
    ``forward(input, hx=None)`` returns ``(output, h_n)``.  PackedSequence is not supported.

    >>> import ember
    >>> from ember import nn
    >>> gru = nn.GRU(10, 20, batch_first=True)
    >>> out, hn = gru(ember.ones((3, 5, 10)))
    >>> out.shape, hn.shape
    ((3, 5, 20), (1, 3, 20))
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


# ------------------------------------------------------------------ cells

class RNNCellBase(Module):
    """Base class of the single-step cells (parameters weight_ih, weight_hh, bias_ih, bias_hh)."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        dt = dtype if dtype is not None else E.get_default_dtype()
        self.weight_ih = Parameter(E.empty((num_chunks * hidden_size, input_size), dtype=dt))
        self.weight_hh = Parameter(E.empty((num_chunks * hidden_size, hidden_size), dtype=dt))
        if bias:
            self.bias_ih = Parameter(E.empty((num_chunks * hidden_size,), dtype=dt))
            self.bias_hh = Parameter(E.empty((num_chunks * hidden_size,), dtype=dt))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        from ember.nn import init
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nl = getattr(self, "nonlinearity", "tanh")
        if nl != "tanh":
            s += f", nonlinearity={nl}"
        return s

    def _input(self, input, name):
        if not isinstance(input, ndarray):
            input = E.asarray(input)
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"{name}: input has inconsistent input_size: got "
                               f"{input.shape[-1]} expected {self.input_size}")
        if input.dtype != self.weight_ih.dtype:
            raise TypeError(f"{name}: input must have the same dtype as the weights "
                            f"({self.weight_ih.dtype}), got {input.dtype}")
        return input

    def _state(self, hx, input, name, what="hx"):
        batched = input.ndim == 2
        if hx is None:
            shape = (input.shape[0], self.hidden_size) if batched else (self.hidden_size,)
            return E.zeros(shape, dtype=input.dtype, device=input.device)
        if not isinstance(hx, ndarray):
            hx = E.asarray(hx)
        if hx.ndim != input.ndim:
            raise ValueError(f"{name}: Expected {what} to be {input.ndim}D (like the input), got "
                             f"{hx.ndim}D instead")
        expected = (input.shape[0], self.hidden_size) if batched else (self.hidden_size,)
        if tuple(hx.shape) != expected:
            raise RuntimeError(f"{name}: {what} has shape {tuple(hx.shape)}, expected {expected}")
        return hx

    def _step(self, mode, input, h, c):
        batched = input.ndim == 2
        x = input[None] if batched else input[None, None]
        h = h if batched else h[None]
        if c is not None and not batched:
            c = c[None]
        res = _rnn_layer(mode, x, h, c, self.weight_ih, self.weight_hh, self.bias_ih,
                         self.bias_hh, None, False, False)
        hn = res[1] if batched else res[1][0]
        if mode != "LSTM":
            return hn
        return hn, (res[2] if batched else res[2][0])


class RNNCell(RNNCellBase):
    """One step of an Elman RNN: ``h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)``.

    >>> import ember
    >>> from ember import nn
    >>> cell = nn.RNNCell(4, 6)
    >>> cell(ember.ones((3, 4))).shape
    (3, 6)
    """

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        input = self._input(input, "RNNCell")
        h = self._state(hx, input, "RNNCell")
        return self._step("RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU", input, h,
                          None)


class LSTMCell(RNNCellBase):
    """One LSTM step; ``forward(input, (h, c)=None)`` returns ``(h', c')``.

    >>> import ember
    >>> from ember import nn
    >>> cell = nn.LSTMCell(4, 6)
    >>> h, c = cell(ember.ones((3, 4)))
    >>> h.shape, c.shape
    ((3, 6), (3, 6))
    """

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        input = self._input(input, "LSTMCell")
        if hx is None:
            h = self._state(None, input, "LSTMCell")
            c = self._state(None, input, "LSTMCell")
        else:
            h = self._state(hx[0], input, "LSTMCell", "h_0")
            c = self._state(hx[1], input, "LSTMCell", "c_0")
        return self._step("LSTM", input, h, c)


class GRUCell(RNNCellBase):
    """One GRU step; ``forward(input, hx=None)`` returns ``h'``.

    >>> import ember
    >>> from ember import nn
    >>> cell = nn.GRUCell(4, 6)
    >>> cell(ember.ones(4)).shape
    (6,)
    """

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        input = self._input(input, "GRUCell")
        h = self._state(hx, input, "GRUCell")
        return self._step("GRU", input, h, None)
