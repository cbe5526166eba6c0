"""The one GPU dispatch (ember/cuda/_dispatch.py): every GPU implementation registered by
name names a public op that exists (a typo would silently send the op elsewhere), and
an op's route is kept on the op object and follows changes to the registrations.
Skipped without a GPU; CI runs it on the emulation (tests/cuda_emu)."""
import gc

import numpy as np
import pytest

import ember
import ember.nn.functional  # noqa: F401  (registers the nn ops)
import ember.fft  # noqa: F401
from ember.autograd.dispatch import DiffOp
from cuda_helpers import GPU_MARK, HAVE_GPU, DEV, gpu

pytestmark = GPU_MARK

if not HAVE_GPU:
    pytest.skip("needs the GPU backend (a GPU or the emulation)", allow_module_level=True)


def _dispatch():
    gpu(np.zeros(1))                    # starts the backend
    from ember.cuda import _dispatch
    return _dispatch


def _public_ops():
    """name -> DiffOp for every op object that exists (some public functions wrap theirs:
    ember.sort's PyTorch form, ember.amax...)."""
    ops = {}
    for o in gc.get_objects():
        try:
            if type(o) is DiffOp:
                ops[o.name] = o
        except Exception:               # an object that cannot even be looked at
            continue
    return ops


def test_every_registration_names_an_op():
    D = _dispatch()
    ops = _public_ops()
    names = D.registered_names()
    assert len(names) > 50
    # an op object (DiffOp) or an elementwise ufunc (its GPU route is asked for by the
    # Cython dispatcher, ember/_core/elementwise.pyx)
    unknown = [n for n in names if n not in ops and not isinstance(getattr(ember, n, None),
                                                                   ember.ufunc)]
    assert unknown == [], f"GPU implementations registered for no op: {unknown}"


def test_every_elementwise_op_is_registered():
    """The op table's rows are GPU ops of the one registry, under their ufunc names."""
    D = _dispatch()
    from ember._core import elementwise as ew
    names = set(D.registered_names())
    assert [r.name for r in ew.op_table() if r.name not in names] == []
    assert D.elementwise_impl("add") is D._IMPLS["add"]
    with pytest.raises(NotImplementedError, match="ember.nosuchop"):
        D.elementwise_impl("nosuchop")


def test_elementwise_routes_follow_the_registrations(monkeypatch):
    """a + b on GPU arrays runs the implementation registered for 'add' (kept per op code
    by the Cython dispatcher, forgotten when the registrations change)."""
    D = _dispatch()
    a = gpu(np.arange(3.0))
    b = gpu(np.ones(3))
    np.testing.assert_array_equal((a + b).cpu().numpy(), [1.0, 2.0, 3.0])   # route kept
    calls = []
    original = D._IMPLS["add"]

    def spy(x1, x2, out=None):
        calls.append((x1, x2))
        return original(x1, x2, out)
    monkeypatch.setitem(D._IMPLS, "add", spy)
    np.testing.assert_array_equal((a + b).cpu().numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(ember.add(a, 2.0).cpu().numpy(), [2.0, 3.0, 4.0])
    assert len(calls) == 2 and calls[0][0] is a and calls[1][1] == 2.0
    assert (-a).shape == (3,) and len(calls) == 2          # negative: its own route
    monkeypatch.undo()
    a + b
    assert len(calls) == 2                                  # the spy is gone again


def test_routes_follow_the_registrations(monkeypatch):
    D = _dispatch()
    x = gpu(np.arange(6.0).reshape(2, 3))
    assert D.route(ember.sum)[0] == D._IMPL                 # ember's kernels
    assert D.route(ember.reshape)[0] == D._GENERIC          # a view: runs as written
    assert D.route(ember.reshape)[1] is ember.reshape.fn
    assert ember.sum.__dict__["_gpu_route"][1] == D.route(ember.sum)   # kept on the op

    calls = []

    def replacement(*args, **kwargs):
        calls.append(args)
        return args[0]
    monkeypatch.setitem(D._IMPLS, "reshape", replacement)
    assert D.route(ember.reshape) == (D._IMPL, replacement)
    assert ember.reshape(x, (3, 2)) is x and len(calls) == 1
    monkeypatch.undo()
    assert D.route(ember.reshape)[0] == D._GENERIC
    assert ember.reshape(x, (3, 2)).shape == (3, 2)


def test_not_implemented_runs_the_op_definition(monkeypatch):
    """An implementation without a kernel for its input hands the call to the op's own
    (device-agnostic) definition: relu of an integer array is maximum(x, 0)."""
    import ember.nn.functional as F
    x = gpu(np.array([-2, 3], dtype=np.int32))
    y = F.relu(x)
    assert y.dtype == np.int32 and y.device == x.device
    np.testing.assert_array_equal(y.cpu().numpy(), [0, 3])


def test_is_device_generic_reads_the_declarations():
    D = _dispatch()
    assert D.is_device_generic(ember.reshape.fn)            # DEVICE_GENERIC in its module
    assert D.is_device_generic(ember.nn.functional.mse_loss.fn)    # fn.device_generic
    assert not D.is_device_generic(ember.sum.fn)
    assert str(DEV).startswith("cuda")


def test_composites_run_their_own_definition():
    """An op built from other ember ops has no second copy in the backend: the GPU
    dispatch runs its one definition (declared device_generic where it is written)."""
    D = _dispatch()
    ops = _public_ops()
    for name in ("logsumexp", "masked_fill", "vecdot", "linalg.vecdot", "linalg.vector_norm",
                 "linalg.trace", "linalg.diagonal", "linalg.outer"):
        assert name not in D.registered_names(), name
        assert D.route(ops[name]) == (D._IMPL, ops[name].fn), name
    x = gpu(np.arange(6.0).reshape(2, 3))
    got = ember.logsumexp(x, axis=1)
    assert got.device == x.device
    want = ember.logsumexp(ember.asarray(np.arange(6.0).reshape(2, 3)), axis=1)
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-12)
