"""Gradient rules of matmul and the linear-algebra functions.

Products (matmul, dot, inner, tensordot, einsum, kron...) and the ``ember.linalg``
factorisations.  Every rule is written with ember ops (matmul, einsum, solve,
inv, svd...), so that the backward pass is itself differentiable; constant
masks (triangles, identities) are the only arrays made from scratch.

Complex inputs follow PyTorch's convention (grad = g * conj(derivative)); the
first-order gradients match PyTorch's for complex inputs too (second order
needs the rules of conj/real/imag).  Factorisation rules assume what
PyTorch assumes: distinct singular values / eigenvalues (svd, eigh with an
eigenvector-dependent loss), full rank (qr, pinv, lstsq), and losses that do
not depend on the sign (phase) of singular / eigen vectors.
"""
import builtins
import operator
import string

import ember as E
from ember.autograd.registry import defgrad, nondifferentiable
from ember._core.dtypes import dtype_kind
from ember._api._util import norm_axis_args, matrix_axes

nondifferentiable("linalg.matrix_rank")

_inf = float("inf")


# ---------------------------------------------------------------- helpers

def _c(x):
    return E.conj(x) if dtype_kind(x.dtype) == "c" else x


def _H(x):
    """Conjugate transpose of the last two axes."""
    return E.matrix_transpose(_c(x))


def _arr(x):
    return x if isinstance(x, E.ndarray) else E.asarray(x)


def _needs(x):
    return isinstance(x, E.ndarray) and x.requires_grad


def _nonzero(x):
    """x with its exact zeros replaced by 1 (a safe divisor; the mask is constant)."""
    return x + (x == 0).astype(x.dtype)


def _eye(n, dtype):
    return E.eye(n, dtype=dtype)


def _diag_embed(v):
    """(..., n) -> (..., n, n) with v on the diagonal."""
    n = v.shape[-1]
    return E.reshape(v, v.shape[:-1] + (1, n)) * _eye(n, v.dtype)


def _col(v):
    return E.reshape(v, v.shape + (1,))


def _row(v):
    return E.reshape(v, v.shape[:-1] + (1, v.shape[-1]))


def _real_dtype(dt):
    return E.finfo(dt).dtype if dtype_kind(dt) == "c" else dt


def _sgn(x):
    """sign(x), or x/|x| for complex (0 at 0); carries no gradient for real x."""
    if dtype_kind(x.dtype) == "c":
        a = E.abs(x)
        return x / _nonzero(a)
    return E.sign(x)


def _rsolve(b, a):
    """b @ inv(a) (solves y a = b) with a solve on the transposes."""
    return E.matrix_transpose(E.linalg.solve(E.matrix_transpose(a), E.matrix_transpose(b)))


def _tril_mask(n, dtype, k=0):
    return E.tril(E.ones((n, n), dtype=dtype), k=k)


# ---------------------------------------------------------------- matmul & co

def _matmul_grads(g, a, b, need_a=True, need_b=True):
    """Gradients of a @ b (NumPy semantics: 1-d operands promoted, batches broadcast)."""
    a1, b1 = a.ndim == 1, b.ndim == 1
    A = E.reshape(a, (1, a.shape[0])) if a1 else a
    B = E.reshape(b, (b.shape[0], 1)) if b1 else b
    G = g
    if a1 and b1:
        G = E.reshape(g, (1, 1))
    elif a1:
        G = E.reshape(g, g.shape[:-1] + (1, g.shape[-1]))
    elif b1:
        G = E.reshape(g, g.shape + (1,))
    ga = gb = None
    if need_a:
        ga = E.matmul(G, _H(B))
        if a1:
            ga = E.reshape(ga, ga.shape[:-2] + (a.shape[0],))
    if need_b:
        gb = E.matmul(_H(A), G)
        if b1:
            gb = E.reshape(gb, gb.shape[:-2] + (b.shape[0],))
    return ga, gb


@defgrad("matmul", "linalg.matmul")
def _(g, res, a, b, **kwargs):
    a, b = _arr(a), _arr(b)
    return _matmul_grads(g, a, b, _needs(a), _needs(b))


def _scalar_product_grads(g, a, b):
    """a * b with a 0-d operand (the engine sums the broadcast gradients down)."""
    return (g * _c(b) if _needs(a) else None), (g * _c(a) if _needs(b) else None)


@defgrad("dot")
def _(g, res, a, b, out=None):
    a, b = _arr(a), _arr(b)
    if a.ndim == 0 or b.ndim == 0:
        return _scalar_product_grads(g, a, b)
    if a.ndim <= 2 and b.ndim <= 2:
        return _matmul_grads(g, a, b, _needs(a), _needs(b))
    return _tensordot_grads(g, a, b, (a.ndim - 1,), (b.ndim - 2 if b.ndim >= 2 else 0,))


@defgrad("inner")
def _(g, res, a, b):
    a, b = _arr(a), _arr(b)
    if a.ndim == 0 or b.ndim == 0:
        return _scalar_product_grads(g, a, b)
    return _tensordot_grads(g, a, b, (a.ndim - 1,), (b.ndim - 1,))


@defgrad("vdot")
def _(g, res, a, b):
    # vdot(a, b) = sum(conj(a) * b) over the flattened arrays (PyTorch's rule)
    a, b = _arr(a), _arr(b)
    ga = gb = None
    if _needs(a):
        ga = E.reshape(_c(g) * E.reshape(b, (-1,)), a.shape)
    if _needs(b):
        gb = E.reshape(g * E.reshape(a, (-1,)), b.shape)
    return ga, gb


@defgrad("outer", "linalg.outer")
def _(g, res, a, b):
    a, b = _arr(a), _arr(b)
    ga = gb = None
    if _needs(a):
        ga = E.reshape(E.matmul(g, _c(E.reshape(b, (-1,)))), a.shape)
    if _needs(b):
        gb = E.reshape(E.matmul(_c(E.reshape(a, (-1,))), g), b.shape)
    return ga, gb


def _norm_axes(axes, ndim, opname):
    out = []
    for ax in axes:
        ax = int(ax)
        if not -ndim <= ax < ndim:
            raise ValueError(f"{opname}: axis {ax} is out of bounds for an array of "
                             f"dimension {ndim}")
        out.append(ax % ndim)
    return tuple(out)


def _tensordot_grads(g, a, b, axes_a, axes_b):
    """Gradients of tensordot(a, b, (axes_a, axes_b)), written as one einsum."""
    letters = iter(string.ascii_letters)
    sa = [next(letters) for _ in range(a.ndim)]
    sb = [None] * b.ndim
    for i, j in zip(axes_a, axes_b):
        sb[j] = sa[i]
    for j in range(b.ndim):
        if sb[j] is None:
            sb[j] = next(letters)
    out = [sa[i] for i in range(a.ndim) if i not in axes_a] + \
          [sb[j] for j in range(b.ndim) if j not in axes_b]
    return tuple(_einsum_grads(g, [sa, sb], out, [a, b]))


@defgrad("tensordot", "linalg.tensordot")
def _(g, res, a, b, *, axes=2):
    a, b = _arr(a), _arr(b)
    if isinstance(axes, int) or (hasattr(axes, "__index__") and not hasattr(axes, "__len__")):
        n = int(axes)
        axes_a, axes_b = tuple(range(a.ndim - n, a.ndim)), tuple(range(n))
    else:
        ax_a, ax_b = axes
        ax_a = (ax_a,) if isinstance(ax_a, int) else tuple(ax_a)
        ax_b = (ax_b,) if isinstance(ax_b, int) else tuple(ax_b)
        axes_a = _norm_axes(ax_a, a.ndim, "tensordot")
        axes_b = _norm_axes(ax_b, b.ndim, "tensordot")
    return _tensordot_grads(g, a, b, axes_a, axes_b)


@defgrad("vecdot", "linalg.vecdot")
def _(g, res, a, b, *, axis=-1):
    # vecdot(a, b) = sum(conj(a) * b, axis); the engine sums broadcast dims down
    a, b = _arr(a), _arr(b)
    nd = builtins.max(a.ndim, b.ndim)
    ax = axis % nd
    ge = E.reshape(g, g.shape[:ax] + (1,) + g.shape[ax:])
    ga = _c(ge) * b if _needs(a) else None
    gb = ge * a if _needs(b) else None
    return ga, gb


@defgrad("kron")
def _(g, res, a, b):
    a, b = _arr(a), _arr(b)
    nd = builtins.max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + tuple(a.shape)
    sb = (1,) * (nd - b.ndim) + tuple(b.shape)
    inter = []
    for p, q in zip(sa, sb):
        inter += [p, q]
    gr = E.reshape(g, tuple(inter))
    ga = gb = None
    if _needs(a):
        br = E.reshape(_c(b), tuple(x for q in sb for x in (1, q)))
        ga = E.reshape(E.sum(gr * br, axis=tuple(range(1, 2 * nd, 2))), a.shape)
    if _needs(b):
        ar = E.reshape(_c(a), tuple(x for p in sa for x in (p, 1)))
        gb = E.reshape(E.sum(gr * ar, axis=tuple(range(0, 2 * nd, 2))), b.shape)
    return ga, gb


@defgrad("cross", "linalg.cross")
def _(g, res, a, b, *, axis=-1, dim=None):
    if dim is not None:
        axis = dim
    a, b = _arr(a), _arr(b)
    nd = builtins.max(a.ndim, b.ndim)
    ax = axis - nd if axis >= 0 else axis
    ga = E.cross(_c(b), g, axis=ax) if _needs(a) else None
    gb = E.cross(g, _c(a), axis=ax) if _needs(b) else None
    return ga, gb


# ---------------------------------------------------------------- einsum

def _parse_einsum(subscripts, shapes):
    """Subscripts with the ellipsis spelled out as letters: (inputs, output, sizes)."""
    if not isinstance(subscripts, str):
        raise NotImplementedError("einsum: autograd supports the subscripts-string form only "
                                  "(einsum('ij,jk->ik', a, b)), not the interleaved "
                                  "operand/sublist form")
    s = subscripts.replace(" ", "")
    if "->" in s:
        lhs, rhs = s.split("->")
    else:
        lhs, rhs = s, None
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum: {len(terms)} operand subscripts for {len(shapes)} operands")
    used = set(c for c in s if c.isalpha())
    free = [c for c in string.ascii_letters if c not in used]
    n_ell = 0
    parsed = []
    for t, shp in zip(terms, shapes):
        if "..." in t:
            pre, post = t.split("...")
            k = len(shp) - len(pre) - len(post)
            n_ell = builtins.max(n_ell, k)
            parsed.append((list(pre), k, list(post)))
        else:
            parsed.append((list(t), None, []))
    if n_ell > len(free):
        raise ValueError("einsum: too many dimensions for the gradient's subscript letters")
    ell = free[:n_ell]
    ins = []
    for pre, k, post in parsed:
        ins.append(pre + (ell[n_ell - k:] if k else []) + post if k is not None else pre)
    if rhs is None:
        counts = {}
        for t in ins:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + sorted(c for c in counts if counts[c] == 1 and c not in ell)
    elif "..." in rhs:
        pre, post = rhs.split("...")
        out = list(pre) + ell + list(post)
    else:
        out = list(rhs)
    sizes = {}
    for t, shp in zip(ins, shapes):
        for c, n in zip(t, shp):
            if sizes.get(c, 1) == 1:
                sizes[c] = n
    return ins, out, sizes


def _einsum_grads(g, subs, out, ops, sizes=None):
    """Gradient of einsum(subs -> out) for each operand, as one einsum each.

    Operand k's gradient contracts g with the other operands onto k's subscripts;
    a label repeated inside k (a diagonal, 'ii') gets a fresh label tied to it by
    an identity matrix, and labels found only in k (summed over inside k) are
    broadcast back afterwards."""
    if sizes is None:
        sizes = {}
        for t, op in zip(subs, ops):
            for c, n in zip(t, op.shape):
                if sizes.get(c, 1) == 1:
                    sizes[c] = n
    used = set(c for t in subs for c in t) | set(out)
    spare = [c for c in string.ascii_letters if c not in used]
    grads = []
    for k, op in enumerate(ops):
        if not _needs(op):
            grads.append(None)
            continue
        in_subs = ["".join(out)]
        in_ops = [g]
        for j, other in enumerate(ops):
            if j != k:
                in_subs.append("".join(subs[j]))
                in_ops.append(_c(other))
        target = []
        seen = set()
        for c in subs[k]:
            if c in seen:
                if not spare:
                    raise ValueError("einsum: too many labels for the gradient's subscripts")
                f = spare.pop()
                in_subs.append(c + f)
                in_ops.append(_eye(sizes[c], g.dtype))
                target.append(f)
            else:
                seen.add(c)
                target.append(c)
        avail = set("".join(in_subs))
        keep = [c for c in target if c in avail]
        gk = E.einsum(",".join(in_subs) + "->" + "".join(keep), *in_ops)
        if len(keep) != len(target):
            shape = tuple(sizes[c] if c in avail else 1 for c in target)
            full = tuple(sizes[c] if c in avail else n for c, n in zip(target, op.shape))
            gk = E.broadcast_to(E.reshape(gk, shape), full)
        grads.append(gk)
    return grads


@defgrad("einsum")
def _(g, res, subscripts, *operands, out=None, dtype=None, optimize=True):
    ops = [_arr(o) for o in operands]
    subs, outs, sizes = _parse_einsum(subscripts, [o.shape for o in ops])
    return (None,) + tuple(_einsum_grads(g, subs, outs, ops, sizes))


# ---------------------------------------------------------------- diagonal & trace
# (ember.diagonal's own rule lives with the shape manipulations)

def _diag_grad(g, shape, offset, axis1, axis2, summed):
    """Gradient of diagonal(x, offset, axis1, axis2) (or of its sum, trace)."""
    nd = len(shape)
    a1, a2 = axis1 % nd, axis2 % nd
    n1, n2 = shape[a1], shape[a2]
    mask = E.eye(n1, n2, k=offset, dtype=g.dtype)
    if summed:
        full = E.reshape(g, g.shape + (1, 1)) * mask
    else:
        L = g.shape[-1]
        r0, c0 = builtins.max(0, -offset), builtins.max(0, offset)
        p1 = E.eye(n1, L, k=-r0, dtype=g.dtype)       # p1[i, k] = 1 where i = k + r0
        p2 = E.eye(n2, L, k=-c0, dtype=g.dtype)
        full = E.einsum("...k,ik,jk->...ij", g, p1, p2)
    rest = [i for i in range(nd) if i not in (a1, a2)]
    perm = rest + [a1, a2]
    inv = [0] * nd
    for i, p in enumerate(perm):
        inv[p] = i
    return E.permute_dims(full, tuple(inv))


@defgrad("linalg.diagonal", save_args=False)
def _(g, res, x, *, offset=0, dim1=-2, dim2=-1):
    return (_diag_grad(g, x.shape, offset, dim1, dim2, False),)


@defgrad("trace", save_args=False)
def _(g, res, x, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    return (_diag_grad(g, x.shape, offset, axis1, axis2, True),)


@defgrad("linalg.trace", save_args=False)
def _(g, res, x, *, offset=0, dtype=None):
    return (_diag_grad(g, x.shape, offset, -2, -1, True),)


# ---------------------------------------------------------------- inverse, solve, det

@defgrad("linalg.inv", save_result=True)
def _(g, res, x):
    # d(X^-1) = -X^-1 dX X^-1
    rh = _H(res)
    return (-E.matmul(rh, E.matmul(g, rh)),)


@defgrad("linalg.solve", save_result=True)
def _(g, res, a, b):
    a, b = _arr(a), _arr(b)
    # X = A^-1 B:  gB = A^-H gX,  gA = -gB X^H
    vec = b.ndim == 1
    if vec:     # g is (..., n): solve it as a column (a 1-d x2 is the only vector case)
        gb = E.reshape(E.linalg.solve(_H(a), _col(g)), g.shape)
    else:
        gb = E.linalg.solve(_H(a), g)
    ga = None
    if _needs(a):
        if vec:
            ga = -(_col(gb) * _c(_row(res)))
        else:
            ga = -E.matmul(gb, _H(res))
    return ga, (gb if _needs(b) else None)


def _adjugate_t(a):
    """conj(adj(A))^T = conj(det A) A^-H, by the SVD (valid for singular A)."""
    u, s, vh = E.linalg.svd(a, full_matrices=False)
    n = s.shape[-1]
    eye = _eye(n, s.dtype)
    m = E.reshape(s, s.shape[:-1] + (1, n)) * (1 - eye) + eye      # m[i, j] = s_j, 1 on i == j
    p = m[..., 0]
    for j in range(1, n):
        p = p * m[..., j]                                            # prod_{j != i} s_j
    phase = E.linalg.det(u) * E.linalg.det(vh)
    return E.reshape(_c(phase), phase.shape + (1, 1)) * E.matmul(u * _row(p), vh)


@defgrad("linalg.det", save_result=True)
def _(g, res, x):
    # d det = det * tr(X^-1 dX)  ->  gX = g conj(det) X^-H  (= g conj(adj X)^T)
    ge = E.reshape(g, g.shape + (1, 1))
    if x.shape[-1] == 0:
        return (E.zeros(x.shape, dtype=g.dtype),)
    if bool(E.any(res == 0)):
        return (ge * _adjugate_t(x),)
    return (ge * E.reshape(_c(res), res.shape + (1, 1)) * _H(E.linalg.inv(x)),)


@defgrad("linalg.slogdet", save_result=True)
def _(g, res, x):
    g_sign, g_logabs = g
    sign = res[0]
    c = g_logabs
    if dtype_kind(x.dtype) == "c":
        # the phase: d sign = i sign Im(tr(X^-1 dX)), d logabsdet = Re(tr(X^-1 dX))
        c = g_logabs - 1j * E.imag(_c(g_sign) * sign)
    return (E.reshape(c, c.shape + (1, 1)) * _H(E.linalg.inv(x)),)


# ---------------------------------------------------------------- factorisations

@defgrad("linalg.cholesky", save_result=True)
def _(g, res, x, *, upper=False):
    # PyTorch's rule: gA = L^-H phi(L^H gL) L^-1, phi = tril with the diagonal halved,
    # made Hermitian (the input is read as Hermitian)
    L, gL = (_H(res), _H(g)) if upper else (res, g)
    n = L.shape[-1]
    low = _tril_mask(n, _real_dtype(L.dtype))
    strict = _tril_mask(n, low.dtype, k=-1)
    t = E.matmul(_H(L), gL) * low
    phi = 0.5 * (t + _H(t * strict))
    lh = _H(L)
    y = E.linalg.solve(lh, phi)                   # L^-H phi
    return (_H(E.linalg.solve(lh, _H(y))),)      # (L^-H phi) L^-1


@defgrad("linalg.qr", save_result=True)
def _(g, res, x, *, mode="reduced"):
    q, r = res
    gq, gr = g
    m, n = x.shape[-2], x.shape[-1]
    if mode == "complete" and m > n:
        raise NotImplementedError(
            f"linalg.qr: the gradient is not defined for mode='complete' with m > n (shape "
            f"{tuple(x.shape)}): Q's extra columns are not unique (PyTorch has the same "
            f"limitation)")
    if m >= n:
        return (_qr_tall_grad(q, r, gq, gr, n),)
    # wide (m < n): A = [X | Y] with X = Q R[:, :m] square and R[:, m:] = Q^H Y
    # (PyTorch's rule): gY = Q gV, and X's gradient sees gQ + Y gV^H
    y = x[..., :, m:]
    gu, gv = gr[..., :, :m], gr[..., :, m:]
    gx = _qr_tall_grad(q, r[..., :, :m], gq + E.matmul(y, _H(gv)), gu, m)
    return (E.concatenate([gx, E.matmul(q, gv)], axis=-1),)


def _qr_tall_grad(q, r, gq, gr, n):
    """Gradient of the reduced QR of an m x n matrix, m >= n."""
    # gA = (gQ + Q copyltu(M)) R^-H,  M = R gR^H - gQ^H Q,  copyltu(M) = tril(M) + tril(M, -1)^H
    M = E.matmul(r, _H(gr)) - E.matmul(_H(gq), q)
    low = _tril_mask(n, _real_dtype(M.dtype))
    strict = _tril_mask(n, low.dtype, k=-1)
    cm = M * low + _H(M * strict)
    b = gq + E.matmul(q, cm)
    return _rsolve(b, _H(r))


def _svd_grad(gu, gs, gvh, u, s, vh, m, n):
    """PyTorch's svd_backward (reduced SVD, distinct nonzero singular values)."""
    skew = lambda a: a - _H(a)  # noqa: E731
    uhgu = skew(E.matmul(_H(u), gu))
    vhgv = skew(E.matmul(vh, _H(gvh)))
    s2 = s * s
    e = _row(s2) - _col(s2)                 # e[i, j] = s_j^2 - s_i^2
    e = _nonzero(e)                         # diagonal (and exact ties): 1
    ret = (uhgu * _row(s) + _col(s) * vhgv) / e
    ret = ret + _diag_embed(gs.astype(ret.dtype) if gs.dtype != ret.dtype else gs)
    if dtype_kind(u.dtype) == "c":
        k = s.shape[-1]
        d = E.sum(uhgu * _eye(k, s.dtype), axis=-1)
        ret = ret + _diag_embed(d / (2 * _nonzero(s)))
    if m > n:
        ga = E.matmul(u, ret)
        gus = gu / _row(_nonzero(s))
        ga = ga + gus - E.matmul(u, E.matmul(_H(u), gus))
        return E.matmul(ga, vh)
    if m < n:
        ga = E.matmul(ret, vh)
        sgv = gvh / _col(_nonzero(s))
        ga = ga + sgv - E.matmul(E.matmul(sgv, _H(vh)), vh)
        return E.matmul(u, ga)
    return E.matmul(u, E.matmul(ret, vh))


@defgrad("linalg.svd", save_result=True)
def _(g, res, x, full_matrices=True, compute_uv=True, hermitian=False):
    if not compute_uv:                  # the singular values alone, as svdvals
        return _svdvals_grad(g, x)
    u, s, vh = res
    gu, gs, gvh = g
    m, n = x.shape[-2], x.shape[-1]
    if m == 0 or n == 0:                # no singular values: nothing flows back
        return (E.zeros(x.shape, dtype=gs.dtype if dtype_kind(x.dtype) != "c" else x.dtype),)
    if full_matrices and m != n:
        # the vectors past k = min(m, n) are an arbitrary basis of a null space: as
        # PyTorch, the gradient is that of the reduced SVD (theirs is ignored)
        k = min(m, n)
        u, gu, vh, gvh = u[..., :, :k], gu[..., :, :k], vh[..., :k, :], gvh[..., :k, :]
    return (_svd_grad(gu, gs, gvh, u, s, vh, m, n),)


@defgrad("linalg.svdvals")
def _(g, res, x):
    return _svdvals_grad(g, x)


def _svdvals_grad(g, x):
    # gA = U diag(gS) V^H
    u, s, vh = E.linalg.svd(x, full_matrices=False)
    return (E.matmul(u * _row(g), vh),)


def _eigh_grad(gw, gv, w, v):
    vhgv = E.matmul(_H(v), gv)
    vhgv = 0.5 * (vhgv - _H(vhgv))                       # the skew-Hermitian part
    e = _nonzero(_row(w) - _col(w))                      # e[i, j] = w_j - w_i, 1 on ties
    n = w.shape[-1]
    off = 1 - _eye(n, _real_dtype(vhgv.dtype))
    ret = vhgv / e * off + _diag_embed(gw.astype(vhgv.dtype) if gw.dtype != vhgv.dtype else gw)
    return E.matmul(v, E.matmul(ret, _H(v)))


@defgrad("linalg.eigh", save_result=True)
def _(g, res, x, *, UPLO="L"):
    w, v = res
    gw, gv = g
    return (_eigh_grad(gw, gv, w, v),)


@defgrad("linalg.eigvalsh")
def _(g, res, x, *, UPLO="L"):
    w, v = E.linalg.eigh(x, UPLO=UPLO)
    return (E.matmul(v * _row(g), _H(v)),)


def _pinv_grad(g, p, a):
    """PyTorch's pinv_backward (constant rank)."""
    m, n = a.shape[-2], a.shape[-1]
    ph, gh = _H(p), _H(g)
    if m <= n:
        k = E.matmul(gh, p)
        kph = E.matmul(k, ph)
        return (-_H(E.matmul(p, k)) + kph - E.matmul(E.matmul(a, p), kph)
                + E.matmul(E.matmul(ph, p), gh - E.matmul(k, a)))
    k = E.matmul(p, gh)
    phk = E.matmul(ph, k)
    return (-_H(E.matmul(k, p)) + E.matmul(E.matmul(gh - E.matmul(a, k), p), ph) + phk
            - E.matmul(E.matmul(phk, p), a))


@defgrad("linalg.pinv", save_result=True)
def _(g, res, x, rcond=None, hermitian=False, *, rtol=None):
    return (_pinv_grad(g, res, x),)


@defgrad("linalg.matrix_power")
def _(g, res, x, n):
    n = int(n)
    if n == 0:
        return (E.zeros(x.shape, dtype=g.dtype),)
    base = x if n > 0 else E.linalg.inv(x)
    k = abs(n)
    bh = _H(base)
    pw = [None, bh]                            # pw[i] = (B^H)^i
    for i in range(2, k):
        pw.append(E.matmul(pw[-1], bh))
    gb = None
    for i in range(k):                         # sum_i (B^H)^i G (B^H)^(k-1-i)
        t = g if i == 0 else E.matmul(pw[i], g)
        if k - 1 - i:
            t = E.matmul(t, pw[k - 1 - i])
        gb = t if gb is None else gb + t
    if n > 0:
        return (gb,)
    return (-E.matmul(bh, E.matmul(gb, bh)),)


@defgrad("linalg.multi_dot")
def _(g, res, arrays):
    ops = [_arr(a) for a in arrays]
    k = len(ops)
    first1, last1 = ops[0].ndim == 1, ops[-1].ndim == 1
    mats = list(ops)
    if first1:
        mats[0] = E.reshape(ops[0], (1, ops[0].shape[0]))
    if last1:
        mats[-1] = E.reshape(ops[-1], (ops[-1].shape[0], 1))
    G = E.reshape(g, (mats[0].shape[0], mats[-1].shape[1]))
    left = [None] * k                          # left[i] = mats[0] @ ... @ mats[i-1]
    for i in range(1, k):
        left[i] = mats[0] if i == 1 else E.matmul(left[i - 1], mats[i - 1])
    right = [None] * k                         # right[i] = mats[i+1] @ ... @ mats[k-1]
    for i in range(k - 2, -1, -1):
        right[i] = mats[k - 1] if i == k - 2 else E.matmul(mats[i + 1], right[i + 1])
    grads = []
    for i, op in enumerate(ops):
        if not _needs(op):
            grads.append(None)
            continue
        t = G
        if right[i] is not None:
            t = E.matmul(t, _H(right[i]))
        if left[i] is not None:
            t = E.matmul(_H(left[i]), t)
        grads.append(E.reshape(t, op.shape))
    return (grads,)


@defgrad("linalg.lstsq", save_result=True)
def _(g, res, a, b, rcond=None):
    a, b = _arr(a), _arr(b)
    gx, gres, _, gsv = g
    x = res[0]
    vec = b.ndim == 1
    B = _col(b) if vec else b
    X = _col(x) if vec else x
    GX = _col(gx) if vec else gx
    p = E.linalg.pinv(a)
    ga = None
    gb = E.matmul(_H(p), GX)                     # X = pinv(A) B
    if _needs(a):
        ga = _pinv_grad(E.matmul(GX, _H(B)), p, a)
    if gres is not None and gres.size:
        # residuals = |A X - B|^2 per column, at the optimum (envelope theorem)
        r = E.matmul(a, X) - B
        rg = r * _row(gres)
        gb = gb - 2 * rg
        if _needs(a):
            ga = ga + 2 * E.matmul(rg, _H(X))
    if gsv is not None and _needs(a):
        u, s, vh = E.linalg.svd(a, full_matrices=False)
        ga = ga + E.matmul(u * _row(gsv), vh)
    if vec:
        gb = E.reshape(gb, b.shape)
    return ga, (gb if _needs(b) else None)


# ---------------------------------------------------------------- norms

def _axis_tuple(axis):
    try:
        return (operator.index(axis),)
    except TypeError:
        return tuple(axis)


def _keep_shape(shape, axes):
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _vnorm_grad(g, nrm, x, axes, ord):
    """Gradient of the vector `ord`-norm of x over `axes`; g, nrm keep their dims."""
    if ord is None:
        ord = 2
    rdt = _real_dtype(x.dtype)
    if ord == 2:
        return x * (g / _nonzero(nrm))
    if ord == 0:
        return E.zeros(x.shape, dtype=x.dtype)
    if ord == 1:
        return _sgn(x) * g
    if ord in (_inf, -_inf):
        mask = (E.abs(x) == nrm).astype(rdt)
        cnt = E.sum(mask, axis=axes, keepdims=True)
        return _sgn(x) * (g / _nonzero(cnt) * mask)
    p = float(ord)
    ax = E.abs(x)
    zero = (ax == 0).astype(rdt)
    scaled = _sgn(x) * (((ax + zero) ** (p - 1)) * (1 - zero))
    if p < 1:
        return scaled * g * nrm ** (1 - p)
    return scaled * (g / _nonzero(nrm ** (p - 1)))


def _mnorm_grad(g, nrm, x, ord):
    """Gradient of the matrix `ord`-norm over the last two axes; g, nrm are (..., 1, 1)."""
    rdt = _real_dtype(x.dtype)
    if ord is None or ord == "fro":
        return x * (g / _nonzero(nrm))
    if ord == "nuc":
        u, s, vh = E.linalg.svd(x, full_matrices=False)
        return g * E.matmul(u, vh)
    if ord in (2, -2):
        u, s, vh = E.linalg.svd(x, full_matrices=False)
        i = 0 if ord == 2 else s.shape[-1] - 1
        return g * E.matmul(u[..., :, i:i + 1], vh[..., i:i + 1, :])
    if ord in (1, -1, _inf, -_inf):
        ax = -2 if ord in (1, -1) else -1               # summed axis
        sums = E.sum(E.abs(x), axis=ax, keepdims=True)
        mask = (sums == nrm).astype(rdt)
        cnt = E.sum(mask, axis=-1 if ax == -2 else -2, keepdims=True)
        return _sgn(x) * (g / _nonzero(cnt) * mask)
    raise ValueError(f"matrix norm: invalid ord {ord!r}")


def _matrix_axes_grad(g, nrm, x, a1, a2, keepdims, ord):
    """_mnorm_grad over the axes (a1, a2) of x, as NumPy's norm(axis=(a1, a2))."""
    nd = x.ndim
    a1, a2 = a1 % nd, a2 % nd
    rest = [i for i in range(nd) if i not in (a1, a2)]
    perm = rest + [a1, a2]
    red = tuple(x.shape[i] for i in rest) + (1, 1)
    xp = E.permute_dims(x, tuple(perm)) if perm != list(range(nd)) else x
    gp = _mnorm_grad(E.reshape(g, red), E.reshape(nrm, red), xp, ord)
    if perm == list(range(nd)):
        return gp
    inv = [0] * nd
    for i, p in enumerate(perm):
        inv[p] = i
    return E.permute_dims(gp, tuple(inv))


@defgrad("linalg.vector_norm", save_result=True)
def _(g, res, x, ord=2, axis=None, keepdims=False, *, dim=None, keepdim=None):
    axis, keepdims = norm_axis_args(axis, dim, keepdims, keepdim, "vector_norm")
    if axis is None:
        axes = tuple(range(x.ndim))
    else:
        axes = _norm_axes(_axis_tuple(axis), x.ndim, "vector_norm")
    ks = _keep_shape(x.shape, axes)
    return (_vnorm_grad(E.reshape(g, ks), E.reshape(res, ks), x, axes, ord),)


@defgrad("linalg.matrix_norm", save_result=True)
def _(g, res, x, ord="fro", axis=None, keepdims=False, *, dim=None, keepdim=None):
    axis, keepdims = norm_axis_args(axis, dim, keepdims, keepdim, "matrix_norm")
    a1, a2 = matrix_axes((-2, -1) if axis is None else axis, "matrix_norm")
    return (_matrix_axes_grad(g, res, x, a1, a2, keepdims, ord),)


@defgrad("linalg.norm", save_result=True)
def _(g, res, x, ord=None, axis=None, keepdims=False):
    if axis is None:
        if ord is None or x.ndim == 1:
            axes = tuple(range(x.ndim))
            ks = _keep_shape(x.shape, axes)
            return (_vnorm_grad(E.reshape(g, ks), E.reshape(res, ks), x, axes, ord),)
        return (_matrix_axes_grad(g, res, x, 0, 1, keepdims, ord),)
    axes = _axis_tuple(axis)
    if len(axes) == 1:
        axes = _norm_axes(axes, x.ndim, "norm")
        ks = _keep_shape(x.shape, axes)
        return (_vnorm_grad(E.reshape(g, ks), E.reshape(res, ks), x, axes, ord),)
    return (_matrix_axes_grad(g, res, x, axes[0], axes[1], keepdims, ord),)


@defgrad("linalg.cond")
def _(g, res, x, p=None):
    if p in (None, 2, -2):
        # s_max / s_min (p=-2: s_min / s_max) from the singular values
        u, s, vh = E.linalg.svd(x, full_matrices=False)
        k = s.shape[-1]
        hi, lo = s[..., 0:1], s[..., k - 1:k]
        if p == -2:
            hi, lo = lo, hi
        first = E.eye(1, k, k=0, dtype=s.dtype)[0]
        last = E.eye(1, k, k=k - 1, dtype=s.dtype)[0]
        if p == -2:
            first, last = last, first
        gs = _col(g) * (first / lo - last * hi / (lo * lo))
        return (E.matmul(u * _row(gs), vh),)
    # norm(x, p) * norm(inv(x), p)
    inv = E.linalg.inv(x)
    n1 = E.linalg.matrix_norm(x, ord=p, keepdims=True)
    n2 = E.linalg.matrix_norm(inv, ord=p, keepdims=True)
    ge = E.reshape(g, g.shape + (1, 1))
    gx = _mnorm_grad(ge * n2, n1, x, p)
    ginv = _mnorm_grad(ge * n1, n2, inv, p)
    ih = _H(inv)
    return (gx - E.matmul(ih, E.matmul(ginv, ih)),)
