"""The optimizers' option checks (ember/optim/_options.py, the one place they live):
each bad value raises PyTorch's error, with PyTorch's words, after the optimizer's name."""
import ast
import pathlib

import pytest

import ember as E
import ember.optim as eo

BAD = (
    [("SGD", dict(lr=-1)), ("SGD", dict(lr=0.1, momentum=-0.5)),
     ("SGD", dict(lr=0.1, weight_decay=-1)), ("SGD", dict(lr=0.1, nesterov=True)),
     ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, nesterov=True))]
    + [(name, kw) for name in ("Adam", "AdamW") for kw in (
        dict(lr=-1), dict(eps=-1e-8), dict(betas=(1.0, 0.9)), dict(betas=(0.9, -0.1)),
        dict(betas=(-0.1, 0.9)), dict(betas=(0.9, 1.0)), dict(weight_decay=-1))]
    + [("RMSprop", kw) for kw in (dict(lr=-1), dict(eps=-1), dict(momentum=-1),
                                  dict(weight_decay=-1), dict(alpha=-1))]
    + [("Adagrad", kw) for kw in (dict(lr=-1), dict(lr_decay=-1), dict(weight_decay=-1),
                                  dict(initial_accumulator_value=-1), dict(eps=-1))]
    + [("Adadelta", kw) for kw in (dict(lr=-1), dict(rho=1.5), dict(rho=-0.1), dict(eps=-1),
                                   dict(weight_decay=-1))]
    + [("LBFGS", dict(lr=-1))]
)


@pytest.mark.parametrize("name,kw", BAD, ids=lambda v: str(v))
def test_bad_option_raises_torchs_error_naming_the_optimizer(name, kw):
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError) as want:
        getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **kw)
    with pytest.raises(ValueError) as got:
        getattr(eo, name)([E.zeros(2, requires_grad=True)], **kw)
    msg = str(got.value)
    assert msg.startswith(f"{name}: "), msg
    assert str(want.value) in msg, (msg, str(want.value))     # (which names the bad value)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta",
                                  "LBFGS"])
def test_lr_must_be_a_number_or_one_element_array(name):
    w = E.zeros(2, requires_grad=True)
    with pytest.raises(TypeError, match=f"{name}: lr must be a number, got str"):
        getattr(eo, name)([w], lr="0.1")
    with pytest.raises(ValueError, match=f"{name}: Tensor lr must be 1-element"):
        getattr(eo, name)([w], lr=E.asarray([0.1, 0.2]))
    opt = getattr(eo, name)([w], lr=E.asarray(0.1))
    assert float(opt.param_groups[0]["lr"]) == pytest.approx(0.1)


def test_good_edge_values_are_accepted():
    w = E.zeros(2, requires_grad=True)
    eo.SGD([w], lr=0.0, momentum=0.0, weight_decay=0.0)
    eo.Adam([w], lr=0.0, betas=(0.0, 0.0), eps=0.0)
    eo.Adadelta([w], rho=1.0)
    eo.RMSprop([w], alpha=0.0)
    eo.SGD([w], lr=0.1, momentum=0.5, nesterov=True)


def test_differentiable_is_refused_by_name():
    w = E.zeros(2, requires_grad=True)
    for name in ("SGD", "Adam", "RMSprop", "Adagrad", "Adadelta"):
        with pytest.raises(NotImplementedError, match=f"{name}: differentiable=True"):
            getattr(eo, name)([w], differentiable=True)


def _imports(path):
    """Every module a Python file imports, at any depth (function bodies included)."""
    tree = ast.parse(pathlib.Path(path).read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append(("." * node.level) + (node.module or ""))
    return out


def test_gpu_optimizer_kernels_import_nothing_above_the_backend():
    """ember/cuda/ops_optim.py is backend code: the optimizers call it, never the reverse."""
    path = pathlib.Path(E.__file__).parent / "cuda" / "ops_optim.py"
    mods = _imports(path)
    assert mods, "no imports found"
    for m in mods:
        assert m == "numpy" or m.startswith(("ember.cuda", "ember._core")) or \
            m in ("math", "sys"), f"ops_optim.py imports {m}"
