"""PyTorch's OpInfo database as an oracle.

For every op of ``torch.testing._internal.common_methods_invocations.op_db`` whose ember
counterpart has the same meaning (tests/opinfo_map.py), the OpInfo's own sample inputs
run through both libraries:

- forward in float32 (ops without float32 support: int64), outputs compared with
  ``assert_allclose`` (rtol 1e-5, atol 1e-5 unless the op's entry says otherwise), shape
  and NaN positions included;
- gradients in float64: ember's gradients of a random-weighted sum of the outputs,
  against torch's, for every input that requires grad.

Samples are limited to ``MAX_SAMPLES`` per op and phase, picked evenly across the first
``GENERATED`` of the OpInfo's list (deterministic: the generators are seeded);
``PYTHONPATH=tests python tests/conformance/test_opinfo.py --all`` runs every sample.  The only exclusions are the
rows of ``opinfo_map.DIFFERENCES``, each with its reason.

``PYTHONPATH=tests python tests/conformance/test_opinfo.py`` prints the counts (equal / compared per phase) and the
samples that differ.
"""
import itertools
import random
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")          # torch.testing._internal imports it

import ember as E                                                   # noqa: E402
from opinfo_map import OPS, DIFFERENCES                             # noqa: E402

MAX_SAMPLES = 8
GENERATED = 48
F32_TOL = (1e-5, 1e-5)
F64_TOL = (1e-7, 1e-7)


def _op_db():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db
    return {o.name + ("." + o.variant_test_name if o.variant_test_name else ""): o
            for o in op_db}


_DB = None


def _db():
    global _DB
    if _DB is None:
        _DB = _op_db()
    return _DB


class Skip(Exception):
    """A sample excused by the table of deliberate differences."""


# ---------------------------------------------------------------- conversions

_TORCH_DT = {torch.float32: E.float32, torch.float64: E.float64, torch.int64: E.int64,
             torch.int32: E.int32, torch.int16: E.int16, torch.int8: E.int8,
             torch.uint8: E.uint8, torch.bool: E.bool, torch.float16: E.float16,
             torch.complex64: E.complex64, torch.complex128: E.complex128}


def to_ember(v, leaves):
    """torch values -> ember values; tensors that require grad become ember leaves
    (appended to `leaves` in traversal order)."""
    if isinstance(v, torch.Tensor):
        a = E.asarray(v.detach().numpy().copy())
        if v.requires_grad:
            a.requires_grad_()
            leaves.append(a)
        return a
    if isinstance(v, torch.dtype):
        return _TORCH_DT[v]
    if isinstance(v, torch.Size):
        return tuple(v)
    if isinstance(v, tuple):
        return tuple(to_ember(x, leaves) for x in v)
    if isinstance(v, list):
        return [to_ember(x, leaves) for x in v]
    return v


def torch_leaves(v, out):
    if isinstance(v, torch.Tensor):
        if v.requires_grad:
            out.append(v)
    elif isinstance(v, (tuple, list)):
        for x in v:
            torch_leaves(x, out)
    elif isinstance(v, dict):
        for x in v.values():
            torch_leaves(x, out)
    return out


def flat(out):
    """Outputs as a flat list (tuples, lists, namedtuples; scalars kept)."""
    if isinstance(out, (tuple, list)):
        return [y for x in out for y in flat(x)]
    return [out]


def as_np(v):
    if isinstance(v, torch.Tensor):
        return v.detach().numpy()
    if isinstance(v, E.ndarray):
        return np.asarray(v.detach())
    return np.asarray(v)


# ---------------------------------------------------------------- running one sample

def _spec_call(name, spec, sample, leaves, ember_wrap):
    fn = spec.resolve()
    x = to_ember(sample.input, leaves)
    args = to_ember(tuple(sample.args), leaves)
    kwargs = {}
    for k, v in sample.kwargs.items():
        k2 = spec.kw.get(k, k)
        if k2 is not None:
            kwargs[k2] = to_ember(v, leaves)
    for k, v in spec.defaults.items():
        kwargs.setdefault(k, v)
    if ember_wrap is not None:
        x = ember_wrap(x, kwargs)
    return fn(x, *args, **kwargs)


def _wrappers(opinfo):
    """OpInfo's gradcheck wrapper (eigh, pinv.hermitian: the input made Hermitian) on
    both sides; None when the op has none."""
    w = getattr(opinfo.gradcheck_wrapper, "__name__", "")
    if w == "gradcheck_wrapper_hermitian_input":
        return (lambda t, kw: t + t.mH), (lambda a, kw: a + E.matrix_transpose(a))
    return None, None


def _torch_call(opinfo, sample, torch_wrap):
    x = sample.input
    if torch_wrap is not None:
        x = torch_wrap(x, sample.kwargs)
    return opinfo(x, *sample.args, **sample.kwargs)


def _excused(name, sample, phase):
    for op, pred, reason, phases in DIFFERENCES:
        if op == name and phase in (("forward", "grad") if phases == "both" else (phases,)) \
                and pred(sample):
            return reason
    return None


def _close(e, t, tol, what):
    te, tt = as_np(e), as_np(t)
    if te.shape != tt.shape:
        raise AssertionError(f"{what}: shape {te.shape} != torch's {tt.shape}")
    if isinstance(t, torch.Tensor) and te.dtype != tt.dtype:
        raise AssertionError(f"{what}: dtype {te.dtype} != torch's {tt.dtype}")
    if tt.dtype.kind in "biu" or te.dtype.kind in "biu" and tt.dtype.kind in "biu":
        np.testing.assert_array_equal(te, tt, err_msg=what)
    else:
        np.testing.assert_allclose(te.astype(np.float64) if te.dtype.kind == "b" else te,
                                   tt, rtol=tol[0], atol=tol[1], equal_nan=True, err_msg=what)


def _samples(opinfo, dtype, requires_grad):
    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    # the first GENERATED samples (some ops have hundreds; making them is the cost), then
    # MAX_SAMPLES of them spread evenly
    # torch's sample iterator looks for a unittest.TestCase on the stack with inspect.stack()
    # (source context of every frame: about 0.4 s under pytest's deep stack, per call); there
    # is none here, so its answer is None anyway
    from torch.testing._internal import common_utils
    find = common_utils.extract_test_fn
    common_utils.extract_test_fn = lambda: None
    try:
        ss = list(itertools.islice(
            opinfo.sample_inputs("cpu", dtype, requires_grad=requires_grad), GENERATED))
    finally:
        common_utils.extract_test_fn = find
    if len(ss) > MAX_SAMPLES:
        idx = np.linspace(0, len(ss) - 1, MAX_SAMPLES).round().astype(int)
        ss = [ss[i] for i in sorted(set(idx.tolist()))]
    return ss


def _post(spec, outs):
    return outs if spec.post is None else spec.post(outs)


def forward_dtype(opinfo):
    dts = opinfo.supported_dtypes("cpu")
    return torch.float32 if torch.float32 in dts else torch.int64


def run_forward(name):
    """(equal, compared, excused, failures) for the float32 forward of op `name`."""
    opinfo, spec = _db()[name], OPS[name]
    tw, ew = _wrappers(opinfo)
    tol = spec.tol or F32_TOL
    res = [0, 0, 0, []]
    for i, s in enumerate(_samples(opinfo, forward_dtype(opinfo), False)):
        if _excused(name, s, "forward"):
            res[2] += 1
            continue
        res[1] += 1
        try:
            tout = _post(spec, _torch_call(opinfo, s, tw))
        except Exception:
            res[1] -= 1                          # torch rejects the sample itself: not compared
            continue
        try:
            eout = _post(spec, _spec_call(name, spec, s, [], ew))
            te, tt = flat(eout), flat(tout)
            if len(te) != len(tt):
                raise AssertionError(f"{len(te)} outputs, torch has {len(tt)}")
            for k, (a, b) in enumerate(zip(te, tt)):
                _close(a, b, tol, f"output {k}")
            res[0] += 1
        except Exception as e:   # noqa: BLE001  (any error is a difference to report)
            res[3].append(f"{name} forward sample {i} ({_describe(s)}): "
                          f"{type(e).__name__}: {str(e).strip()[:300]}")
    return tuple(res)


def run_grad(name):
    """(equal, compared, excused, failures) for the float64 gradients of op `name`."""
    opinfo, spec = _db()[name], OPS[name]
    if not (spec.grad and opinfo.supports_autograd
            and torch.float64 in opinfo.supported_backward_dtypes("cpu")):
        return 0, 0, 0, []
    tw, ew = _wrappers(opinfo)
    res = [0, 0, 0, []]
    for i, s in enumerate(_samples(opinfo, torch.float64, True)):
        tleaves = torch_leaves((s.input, s.args, s.kwargs), [])
        if not tleaves:
            continue
        try:
            touts = [t for t in flat(_post(spec, _torch_call(opinfo, s, tw)))
                     if isinstance(t, torch.Tensor) and t.requires_grad]
        except Exception:
            continue                              # torch rejects the sample itself
        if not touts:
            continue
        if _excused(name, s, "grad"):
            res[2] += 1
            continue
        res[1] += 1
        gen = torch.Generator().manual_seed(1234 + i)
        weights = [torch.randn(t.shape, dtype=t.dtype, generator=gen) for t in touts]
        tloss = sum((w * t).sum() for w, t in zip(weights, touts))
        tgrads = torch.autograd.grad(tloss, tleaves, allow_unused=True)
        try:
            eleaves = []
            eouts = flat(_post(spec, _spec_call(name, spec, s, eleaves, ew)))
            eouts = [e for e in eouts if isinstance(e, E.ndarray)
                     and np.dtype(e.dtype).kind in "fc"]
            if len(eouts) != len(touts):
                raise AssertionError(f"{len(eouts)} differentiable outputs, torch has "
                                     f"{len(touts)}")
            for k, e in enumerate(eouts):
                if not e.requires_grad:
                    raise AssertionError(f"output {k} does not require grad")
            eloss = sum((E.asarray(w.numpy()) * e).sum() for w, e in zip(weights, eouts))
            egrads = E.autograd.grad(eloss, eleaves, allow_unused=True)
            for k, (ge, gt) in enumerate(zip(egrads, tgrads)):
                shape = tuple(tleaves[k].shape)
                ge = np.zeros(shape) if ge is None else as_np(ge)
                gt = np.zeros(shape) if gt is None else as_np(gt)
                _close(ge, gt, spec.tol or F64_TOL, f"gradient of input {k}")
            res[0] += 1
        except Exception as e:   # noqa: BLE001
            res[3].append(f"{name} grad sample {i} ({_describe(s)}): "
                          f"{type(e).__name__}: {str(e).strip()[:300]}")
    return tuple(res)


def _describe(s):
    def d(v):
        if isinstance(v, torch.Tensor):
            return f"T{tuple(v.shape)}"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(d(x) for x in v) + "]"
        return repr(v)
    kw = ", ".join(f"{k}={d(v)}" for k, v in s.kwargs.items())
    return ", ".join(x for x in (d(s.input), ", ".join(d(a) for a in s.args), kw) if x)


# ---------------------------------------------------------------- the tests

NAMES = sorted(OPS)


@pytest.mark.parametrize("name", NAMES)
def test_forward_float32(name):
    ok, n, _, failures = run_forward(name)
    assert not failures, "\n".join(failures)
    assert ok == n


@pytest.mark.parametrize("name", NAMES)
def test_gradients_float64(name):
    ok, n, _, failures = run_grad(name)
    assert not failures, "\n".join(failures)
    assert ok == n


def test_every_mapped_op_is_in_op_db_and_ember():
    db = _db()
    missing = [n for n in OPS if n not in db]
    assert not missing, f"not in op_db: {missing}"
    for name, spec in OPS.items():
        spec.resolve()                  # raises AttributeError naming the missing function
    for op, pred, reason, phases in DIFFERENCES:
        assert op in OPS and reason and phases in ("forward", "grad", "both")


def main():
    tot = {"forward": [0, 0, 0], "grad": [0, 0, 0]}
    lines = []
    for name in NAMES:
        for phase, fn in (("forward", run_forward), ("grad", run_grad)):
            try:
                ok, n, ex, failures = fn(name)
            except Exception as e:      # noqa: BLE001
                lines.append(f"{name} {phase}: {type(e).__name__}: {e}")
                continue
            t = tot[phase]
            t[0] += ok
            t[1] += n
            t[2] += ex
            lines.extend(failures)
    print("\n".join(lines))
    print(f"ops: {len(NAMES)}")
    for phase, (ok, n, ex) in tot.items():
        print(f"{phase}: {ok}/{n} equal, {ex} excused by the table")


if __name__ == "__main__":
    if "--all" in sys.argv:
        MAX_SAMPLES = GENERATED = 10 ** 9
    main()
