"""A NumPy model of the cuDNN functions ember calls, for the emulation (device memory is
host memory there): installed with ``ember.cuda._cudnn_lib.set_table(FakeCudnn())``, in
place of the library's function table, the one boundary between ember and cuDNN.

It keeps descriptors as cuDNN does (by handle), checks what cuDNN checks (the output
descriptor agrees with the convolution's geometry, the workspace is as large as the
algorithm asks, the handle is used on the device it was made on), records every call,
and computes convolutions and batch norm with NumPy references in float64, written back
in the descriptors' dtype and strides.  Its algorithm lists are data (``algos``): which
ones the heuristics return and in what order, their times (the benchmark's order), their
workspace, determinism and status; ``refuse`` makes a direction's run (or every batch
norm's) answer a given status.
"""
import ctypes

import numpy as np
from numpy.lib.stride_tricks import as_strided

import fakecupy
from ember._core.dtypes import BFLOAT16

SUCCESS, BAD_PARAM, NOT_SUPPORTED = 0, 2000, 3000
_DTYPES = {0: np.dtype(np.float32), 1: np.dtype(np.float64), 2: np.dtype(np.float16),
           9: BFLOAT16}
NCHW, NHWC = 0, 1
SPATIAL, SPATIAL_PERSISTENT = 1, 2            # cudnnBatchNormMode_t
#: (data type, compute type) pairs cuDNN's convolutions take: FLOAT, DOUBLE, TRUE_HALF,
#: PSEUDO_HALF and PSEUDO_BFLOAT16 configurations (bfloat16 computes in float only)
_CONFIGS = {(0, 0), (1, 1), (2, 2), (2, 0), (9, 0)}


def _strides(dims, fmt):
    order = (0, 1, 2, 3) if fmt == NCHW else (0, 2, 3, 1)
    st, s = [0] * 4, 1
    for ax in reversed(order):
        st[ax] = s
        s *= dims[ax]
    return st


def view(ptr, dtype, dims, strides):
    """The NumPy array of `dims` and element `strides` at device address `ptr`."""
    dtype = np.dtype(dtype)
    extent = 1 + sum((d - 1) * s for d, s in zip(dims, strides)) if all(dims) else 0
    buf = (ctypes.c_char * max(extent * dtype.itemsize, 1)).from_address(int(ptr))
    flat = np.frombuffer(buf, dtype=np.uint8)[:extent * dtype.itemsize].view(dtype)
    return as_strided(flat, tuple(dims), tuple(s * dtype.itemsize for s in strides))


def _scalar(addr, double):
    return (ctypes.c_double if double else ctypes.c_float).from_address(int(addr)).value


# ------------------------------------------------------------------ NumPy references

def _cols(x, KH, KW, pad, stride, dil, OH, OW):
    """cols[n, c, i, j, p, q] = padded x[n, c, i*dh + p*sh, j*dw + q*sw]."""
    (ph, pw), (sh, sw), (dh, dw) = pad, stride, dil
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    N, C = x.shape[:2]
    cols = np.empty((N, C, KH, KW, OH, OW))
    for i in range(KH):
        for j in range(KW):
            cols[:, :, i, j] = xp[:, :, i * dh: i * dh + sh * (OH - 1) + 1: sh,
                                  j * dw: j * dw + sw * (OW - 1) + 1: sw]
    return cols


def conv_forward(x, w, pad, stride, dil, groups):
    N, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    OH, OW = out_hw(H, W, KH, KW, pad, stride, dil)
    cols = _cols(x, KH, KW, pad, stride, dil, OH, OW).reshape(N, groups, Cg, KH, KW, OH, OW)
    y = np.einsum("ngcklpq,gockl->ngopq", cols, w.reshape(groups, O // groups, Cg, KH, KW))
    return y.reshape(N, O, OH, OW)


def conv_backward_data(dy, w, hw, pad, stride, dil, groups):
    N, O, OH, OW = dy.shape
    _, Cg, KH, KW = w.shape
    (ph, pw), (sh, sw), (dh, dw) = pad, stride, dil
    H, W = hw
    dcols = np.einsum("gockl,ngopq->ngcklpq", w.reshape(groups, O // groups, Cg, KH, KW),
                      dy.reshape(N, groups, O // groups, OH, OW)).reshape(
                          N, groups * Cg, KH, KW, OH, OW)
    dxp = np.zeros((N, groups * Cg, H + 2 * ph + sh * OH + dh * KH,
                    W + 2 * pw + sw * OW + dw * KW))
    for i in range(KH):
        for j in range(KW):
            dxp[:, :, i * dh: i * dh + sh * (OH - 1) + 1: sh,
                j * dw: j * dw + sw * (OW - 1) + 1: sw] += dcols[:, :, i, j]
    return dxp[:, :, ph:ph + H, pw:pw + W]


def conv_backward_filter(x, dy, wdims, pad, stride, dil, groups):
    N, O, OH, OW = dy.shape
    _, Cg, KH, KW = wdims
    cols = _cols(x, KH, KW, pad, stride, dil, OH, OW).reshape(N, groups, Cg, KH, KW, OH, OW)
    dw = np.einsum("ngcklpq,ngopq->gockl", cols, dy.reshape(N, groups, O // groups, OH, OW))
    return dw.reshape(wdims)


def out_hw(H, W, KH, KW, pad, stride, dil):
    return ((H + 2 * pad[0] - dil[0] * (KH - 1) - 1) // stride[0] + 1,
            (W + 2 * pad[1] - dil[1] * (KW - 1) - 1) // stride[1] + 1)


# ------------------------------------------------------------------ the fake library

class Algo:
    """One algorithm as the fake reports it."""

    def __init__(self, algo, time, memory, deterministic, status=SUCCESS, math=0):
        self.algo, self.time, self.memory = algo, time, memory
        self.deterministic, self.status, self.math = deterministic, status, math


def default_algos():
    """Heuristic order first; the times give the benchmark another order.  The forward's
    first heuristic choice is not its fastest; the backward ones put non-deterministic
    algorithms first; one algorithm per direction is NOT_SUPPORTED."""
    return {
        "forward": [Algo(1, 2.0, 4096, True), Algo(0, 1.0, 0, True),
                    Algo(6, 0.5, 0, True, status=NOT_SUPPORTED)],
        "backward_data": [Algo(0, 1.0, 0, False), Algo(5, 0.2, 0, True, status=NOT_SUPPORTED),
                          Algo(1, 2.0, 512, True)],
        "backward_filter": [Algo(0, 1.0, 0, False), Algo(3, 1.5, 256, False),
                            Algo(1, 2.0, 2048, True)],
    }


class FakeCudnn:
    version = 90800

    def __init__(self, algos=None):
        self.algos = algos or default_algos()
        self.refuse = {}             # direction (or "batch_norm") -> the status its run answers
        self.calls = []              # (function name, details)
        self.runs = []               # dicts describing each convolution / batch-norm run
        self._next = 1
        self.handles, self.tensors, self.filters, self.convs = {}, {}, {}, {}
        self.bn_modes = {}           # parameter descriptor -> the mode it was derived for
        for direction, names in _CONV.items():
            get, find, ws, run = names
            setattr(self, get, self._bind(self._get, direction, get))
            setattr(self, find, self._bind(self._find, direction, find))
            setattr(self, ws, self._bind(self._ws, direction, ws))
            setattr(self, run, self._bind(self._run, direction, run))

    # ---- bookkeeping
    def _bind(self, fn, direction, name):
        def call(*args):
            self.calls.append((name, direction))
            return fn(direction, *args)
        return call

    def _new(self, table, value, out):
        h = self._next
        self._next += 1
        table[h] = value
        out.value = h
        return SUCCESS

    def names(self):
        return [c[0] for c in self.calls]

    def count(self, name):
        return sum(1 for c in self.calls if c[0] == name)

    def cudnnGetVersion(self):
        return self.version

    def cudnnCreate(self, out):
        self.calls.append(("cudnnCreate", None))
        return self._new(self.handles, {"device": fakecupy.runtime.getDevice(), "stream": 0},
                         out)

    def cudnnSetStream(self, h, stream):
        self.calls.append(("cudnnSetStream", stream))
        self.handles[h]["stream"] = stream
        return SUCCESS

    def _use(self, h):
        """The handle is used on the device it was made on (as cuDNN requires)."""
        dev = fakecupy.runtime.getDevice()
        if self.handles[h]["device"] != dev:
            raise AssertionError(f"cuDNN handle of device {self.handles[h]['device']} used "
                                 f"on device {dev}")

    def cudnnCreateTensorDescriptor(self, out):
        self.calls.append(("cudnnCreateTensorDescriptor", None))
        return self._new(self.tensors, None, out)

    def cudnnSetTensorNdDescriptor(self, d, dtype, nb, dims, strides):
        self.calls.append(("cudnnSetTensorNdDescriptor", None))
        if dtype not in _DTYPES or nb < 3:
            return BAD_PARAM
        self.tensors[d] = (dtype, [dims[i] for i in range(nb)], [strides[i] for i in range(nb)])
        return SUCCESS

    def cudnnCreateFilterDescriptor(self, out):
        self.calls.append(("cudnnCreateFilterDescriptor", None))
        return self._new(self.filters, None, out)

    def cudnnSetFilterNdDescriptor(self, d, dtype, fmt, nb, dims):
        self.calls.append(("cudnnSetFilterNdDescriptor", None))
        if dtype not in _DTYPES or nb != 4 or fmt not in (NCHW, NHWC):
            return BAD_PARAM
        dims = [dims[i] for i in range(nb)]
        self.filters[d] = (dtype, dims, _strides(dims, fmt), fmt)
        return SUCCESS

    def cudnnCreateConvolutionDescriptor(self, out):
        self.calls.append(("cudnnCreateConvolutionDescriptor", None))
        return self._new(self.convs, {"groups": 1, "math": 0}, out)

    def cudnnSetConvolution2dDescriptor(self, d, ph, pw, sh, sw, dh, dw, mode, compute):
        self.calls.append(("cudnnSetConvolution2dDescriptor", None))
        if mode != 1 or min(sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
            return BAD_PARAM
        self.convs[d].update(pad=(ph, pw), stride=(sh, sw), dil=(dh, dw), compute=compute)
        return SUCCESS

    def cudnnSetConvolutionGroupCount(self, d, groups):
        self.calls.append(("cudnnSetConvolutionGroupCount", groups))
        self.convs[d]["groups"] = groups
        return SUCCESS

    def cudnnSetConvolutionMathType(self, d, math):
        self.calls.append(("cudnnSetConvolutionMathType", math))
        self.convs[d]["math"] = math
        return SUCCESS

    # ---- convolutions: A, B inputs, O output in the direction's order
    def _geometry(self, direction, a, b, c, o):
        """(x desc, w desc, y desc) with the geometry checked, or None (BAD_PARAM)."""
        x, w, y = {"forward": (a, b, o), "backward_data": (o, a, b),
                   "backward_filter": (a, o, b)}[direction]
        xt, wf, yt, cv = self.tensors.get(x), self.filters.get(w), self.tensors.get(y), \
            self.convs.get(c)
        if None in (xt, wf, yt, cv):
            return None
        N, C, H, W = xt[1]
        K, Cg, KH, KW = wf[1]
        if not (xt[0] == wf[0] == yt[0]) or C != Cg * cv["groups"] or K % cv["groups"]:
            return None
        if (xt[0], cv["compute"]) not in _CONFIGS:
            return None
        if yt[1] != [N, K, *out_hw(H, W, KH, KW, cv["pad"], cv["stride"], cv["dil"])]:
            return None
        return xt, wf, yt, cv

    def _algos(self, direction):
        return self.algos[direction]

    def _fill(self, direction, n, got, perf, order):
        algos = list(self._algos(direction))
        if order == "time":
            algos.sort(key=lambda a: a.time)
        algos = algos[:n]
        for i, a in enumerate(algos):
            perf[i].algo, perf[i].status, perf[i].time = a.algo, a.status, a.time
            perf[i].memory, perf[i].mathType = a.memory, a.math
            perf[i].determinism = 1 if a.deterministic else 0
        got.value = len(algos)

    def _get(self, direction, h, a, b, c, o, n, got, perf):
        self._use(h)
        if self._geometry(direction, a, b, c, o) is None:
            return BAD_PARAM
        self._fill(direction, n, got, perf, "heuristic")
        return SUCCESS

    def _find(self, direction, h, a, pa, b, pb, c, o, po, n, got, perf, ws, size):
        self._use(h)
        geo = self._geometry(direction, a, b, c, o)
        if geo is None:
            return BAD_PARAM
        self.runs.append({"direction": direction, "find": True, "workspace": (ws, size)})
        out = geo[2] if direction == "forward" else geo[0] if direction == "backward_data" \
            else geo[1]
        view(po, _DTYPES[out[0]], out[1], out[2])[...] = 7       # the search leaves garbage
        self._fill(direction, n, got, perf, "time")
        return SUCCESS

    def _ws(self, direction, h, a, b, c, o, algo, size):
        self._use(h)
        if self._geometry(direction, a, b, c, o) is None:
            return BAD_PARAM
        for al in self._algos(direction):
            if al.algo == algo:
                size.value = al.memory
                return SUCCESS if al.status == SUCCESS else al.status
        return NOT_SUPPORTED

    def _run(self, direction, h, alpha, a, pa, b, pb, c, algo, ws, size, beta, o, po):
        self._use(h)
        geo = self._geometry(direction, a, b, c, o)
        if geo is None:
            return BAD_PARAM
        xt, wf, yt, cv = geo
        info = {"direction": direction, "algo": algo, "workspace": (ws, size),
                "math": cv["math"], "stream": self.handles[h]["stream"],
                "device": fakecupy.runtime.getDevice(), "dtype": _DTYPES[xt[0]],
                "tensor_dtypes": (_DTYPES[xt[0]], _DTYPES[wf[0]], _DTYPES[yt[0]]),
                "compute": _DTYPES.get(cv["compute"]),
                "x": (xt[1], xt[2]), "w": (wf[1], wf[3]), "y": (yt[1], yt[2]),
                "groups": cv["groups"], "pad": cv["pad"], "stride": cv["stride"],
                "dil": cv["dil"], "find": False}
        self.runs.append(info)
        al = next((x for x in self._algos(direction) if x.algo == algo), None)
        if al is None or al.status != SUCCESS:
            return NOT_SUPPORTED
        if size < al.memory or (al.memory and not ws):
            return BAD_PARAM
        if direction in self.refuse:
            return self.refuse[direction]
        double = _DTYPES[xt[0]] == np.float64
        if _scalar(alpha, double) != 1.0 or _scalar(beta, double) != 0.0:
            return BAD_PARAM
        geom = (cv["pad"], cv["stride"], cv["dil"], cv["groups"])
        if direction == "forward":
            x = view(pa, _DTYPES[xt[0]], xt[1], xt[2]).astype(np.float64)
            w = view(pb, _DTYPES[wf[0]], wf[1], wf[2]).astype(np.float64)
            out, r = view(po, _DTYPES[yt[0]], yt[1], yt[2]), conv_forward(x, w, *geom)
        elif direction == "backward_data":
            w = view(pa, _DTYPES[wf[0]], wf[1], wf[2]).astype(np.float64)
            dy = view(pb, _DTYPES[yt[0]], yt[1], yt[2]).astype(np.float64)
            out = view(po, _DTYPES[xt[0]], xt[1], xt[2])
            r = conv_backward_data(dy, w, xt[1][2:], *geom)
        else:
            x = view(pa, _DTYPES[xt[0]], xt[1], xt[2]).astype(np.float64)
            dy = view(pb, _DTYPES[yt[0]], yt[1], yt[2]).astype(np.float64)
            out = view(po, _DTYPES[wf[0]], wf[1], wf[2])
            r = conv_backward_filter(x, dy, wf[1], *geom)
        out[...] = r.astype(out.dtype)
        return SUCCESS

    # ---- batch norm (spatial)
    def cudnnDeriveBNTensorDescriptor(self, d, xd, mode):
        self.calls.append(("cudnnDeriveBNTensorDescriptor", mode))
        dt, dims, _ = self.tensors[xd]
        if mode not in (SPATIAL, SPATIAL_PERSISTENT):
            return BAD_PARAM
        pdt = 1 if dt == 1 else 0
        self.tensors[d] = (pdt, [1, dims[1], 1, 1], [dims[1], 1, 1, 1])
        self.bn_modes[d] = mode
        return SUCCESS

    def _bn_info(self, direction, mode, xd, bd, **more):
        """What a batch-norm run records: its mode (checked against the one the parameter
        descriptor was derived for) and the data descriptor's dtype, dims and strides."""
        if mode not in (SPATIAL, SPATIAL_PERSISTENT) or self.bn_modes.get(bd) != mode:
            return None
        dt, dims, strides = self.tensors[xd]
        return {"direction": direction, "mode": mode, "dtype": _DTYPES[dt], "dims": dims,
                "strides": strides, **more}

    def _bn(self, xd, px, bd):
        dt, dims, strides = self.tensors[xd]
        pdt = _DTYPES[self.tensors[bd][0]]
        x = view(px, _DTYPES[dt], dims, strides)
        C = dims[1]
        return x, (lambda p: view(p, pdt, [C], [1])), dims

    def cudnnBatchNormalizationForwardTraining(self, h, mode, alpha, beta, xd, px, yd, py, bd,
                                               scale, bias, factor, rmean, rvar, eps, smean,
                                               sinv):
        self.calls.append(("cudnnBatchNormalizationForwardTraining", None))
        self._use(h)
        if "batch_norm" in self.refuse:
            return self.refuse["batch_norm"]
        info = self._bn_info("batch_norm", mode, xd, bd, eps=eps,
                             stream=self.handles[h]["stream"])
        if info is None or (rmean is None) != (rvar is None) or \
                (smean is None) != (sinv is None) or self.tensors[yd] != self.tensors[xd]:
            return BAD_PARAM
        x, vec, dims = self._bn(xd, px, bd)
        if [_scalar(s, x.dtype == np.float64) for s in (alpha, beta)] != [1.0, 0.0]:
            return BAD_PARAM
        self.runs.append(info)
        xf = x.astype(np.float64)
        axes = (0, 2, 3)
        mean = xf.mean(axis=axes)
        var = xf.var(axis=axes)
        inv = 1.0 / np.sqrt(var + eps)
        b4 = (1, -1, 1, 1)
        y = ((xf - mean.reshape(b4)) * inv.reshape(b4) * vec(scale).astype(np.float64).reshape(b4)
             + vec(bias).astype(np.float64).reshape(b4))
        view(py, x.dtype, dims, self.tensors[yd][2])[...] = y.astype(x.dtype)
        if smean is not None:
            vec(smean)[...] = mean
            vec(sinv)[...] = inv
        if rmean is not None:
            raise AssertionError("ember updates the running statistics itself")
        return SUCCESS

    def cudnnBatchNormalizationForwardInference(self, h, mode, alpha, beta, xd, px, yd, py, bd,
                                                scale, bias, mean, var, eps):
        self.calls.append(("cudnnBatchNormalizationForwardInference", None))
        self._use(h)
        if "batch_norm" in self.refuse:
            return self.refuse["batch_norm"]
        info = self._bn_info("batch_norm_eval", mode, xd, bd, eps=eps)
        if info is None or self.tensors[yd] != self.tensors[xd]:
            return BAD_PARAM
        x, vec, dims = self._bn(xd, px, bd)
        if [_scalar(s, x.dtype == np.float64) for s in (alpha, beta)] != [1.0, 0.0]:
            return BAD_PARAM
        self.runs.append(info)
        b4 = (1, -1, 1, 1)
        f = [vec(p).astype(np.float64).reshape(b4) for p in (scale, bias, mean, var)]
        y = (x.astype(np.float64) - f[2]) / np.sqrt(f[3] + eps) * f[0] + f[1]
        view(py, x.dtype, dims, self.tensors[yd][2])[...] = y.astype(x.dtype)
        return SUCCESS

    def cudnnBatchNormalizationBackward(self, h, mode, ad, bd_, ap, bp, xd, px, dyd, pdy, dxd,
                                        pdx, bd, scale, dscale, dbias, eps, smean, sinv):
        self.calls.append(("cudnnBatchNormalizationBackward", None))
        self._use(h)
        if "batch_norm" in self.refuse:
            return self.refuse["batch_norm"]
        if smean is None or sinv is None:
            raise AssertionError("ember always passes the saved statistics")
        info = self._bn_info("batch_norm_backward", mode, xd, bd)
        if info is None:
            return BAD_PARAM
        x, vec, dims = self._bn(xd, px, bd)
        double = x.dtype == np.float64
        if [_scalar(s, double) for s in (ad, bd_, ap, bp)] != [1.0, 0.0, 1.0, 0.0]:
            return BAD_PARAM                # ember overwrites dx, dscale, dbias
        self.runs.append(info)
        dy = view(pdy, x.dtype, dims, self.tensors[dyd][2]).astype(np.float64)
        b4 = (1, -1, 1, 1)
        mean, inv = vec(smean).astype(np.float64), vec(sinv).astype(np.float64)
        w = vec(scale).astype(np.float64)
        xhat = (x.astype(np.float64) - mean.reshape(b4)) * inv.reshape(b4)
        axes = (0, 2, 3)
        M = dims[0] * dims[2] * dims[3]
        db = dy.sum(axis=axes)
        dg = (dy * xhat).sum(axis=axes)
        dx = (w * inv).reshape(b4) / M * (M * dy - db.reshape(b4) - xhat * dg.reshape(b4))
        view(pdx, x.dtype, dims, self.tensors[dxd][2])[...] = dx.astype(x.dtype)
        vec(dscale)[...] = dg
        vec(dbias)[...] = db
        return SUCCESS


_CONV = {
    "forward": ("cudnnGetConvolutionForwardAlgorithm_v7", "cudnnFindConvolutionForwardAlgorithmEx",
                "cudnnGetConvolutionForwardWorkspaceSize", "cudnnConvolutionForward"),
    "backward_data": ("cudnnGetConvolutionBackwardDataAlgorithm_v7",
                      "cudnnFindConvolutionBackwardDataAlgorithmEx",
                      "cudnnGetConvolutionBackwardDataWorkspaceSize",
                      "cudnnConvolutionBackwardData"),
    "backward_filter": ("cudnnGetConvolutionBackwardFilterAlgorithm_v7",
                        "cudnnFindConvolutionBackwardFilterAlgorithmEx",
                        "cudnnGetConvolutionBackwardFilterWorkspaceSize",
                        "cudnnConvolutionBackwardFilter"),
}
