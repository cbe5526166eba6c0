"""ember's layers, read from its imports (nothing is imported to check them).

The Python modules' layers are import-linter's contracts (pyproject.toml, run by
``lint-imports`` in CI).  import-linter cannot read Cython, so the ``.pyx`` modules
are checked here against the same order, and every file's imports (lazy ones and
Cython's too) against circles: no two files may import each other, directly or
through others (tests/import_graph.py builds the graph).
"""
import os

import pytest

import import_graph as ig

# the layers, bottom up: a module may import its own layer and the ones below
LAYERS = [
    ("ember._core",),
    ("ember.cuda", "ember._kernels"),
    ("ember._api", "ember.linalg", "ember.random", "ember.serialization"),
    ("ember.autograd",),
    ("ember.amp",),
    ("ember.nn", "ember.optim", "ember.data", "ember.distributed"),
]


# The elementwise loop table and the loops generated from it (ember/_kernels/cpu/optable.py,
# gen_loops.py -> _loops_*.pyx) import nothing from ember: leaves that ember._core's
# elementwise dispatcher may load from under any layer.
LEAVES = ("ember._kernels.cpu.optable", "ember._kernels.cpu._loops")


def layer_of(module):
    """The layer index of `module` (-1: a leaf), or None outside the layers (the root
    package, fft...)."""
    if module.startswith(LEAVES):
        return -1
    for i, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    return None


def _pyx_files():
    out = []
    mods = ig.module_files()
    for name, path in sorted(mods.items()):
        if path.endswith(".pyx"):
            out.append((name, path))
    return out


def test_leaves_import_nothing_from_ember():
    assert ig.graph()["ember._kernels.cpu.optable"] == set()
    gen = os.path.join(os.path.dirname(ig.ROOT), "ember", "_kernels", "cpu", "gen_loops.py")
    with open(gen, encoding="utf-8") as fh:
        template = fh.read()
    assert [m for m, _ in ig.cython_imports(template) if m.startswith("ember")] == []


def test_every_pyx_is_in_a_layer():
    files = _pyx_files()
    assert files, "no Cython modules found under ember/"
    assert [n for n, _ in files if layer_of(n) is None] == []


@pytest.mark.parametrize("name,path", _pyx_files(), ids=lambda v: str(v).split(os.sep)[-1])
def test_cython_imports_go_down(name, path):
    """A Cython module imports (or cimports) only its own layer and those below it:
    nothing from the root package ``ember`` nor from a layer above."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    own = layer_of(name)
    bad = []
    for src, names in ig.cython_imports(text):
        if src != "ember" and not src.startswith("ember."):
            continue
        their = layer_of(src)
        if src == "ember._kernels.cpu":             # the package: what it names decides
            their = max((layer_of(src + "." + n) for n in names), default=layer_of(src))
        if their is None or their > own:
            bad.append(src)
    assert bad == [], f"{name} ({LAYERS[own][0]} layer) imports {bad} from above it"


def test_cython_import_lines_are_read():
    """The line reader sees every form the Cython modules use."""
    text = ("from ember._core.array cimport ndarray, grad_enabled\n"
            "import ember.cuda\n"
            "    from ember.nn import functional as F\n"
            "cimport numpy as cnp\n"
            "from ember._core.dtypes import (a,\n")
    assert ig.cython_imports(text) == [
        ("ember._core.array", ["ndarray", "grad_enabled"]), ("ember.cuda", []),
        ("ember.nn", ["functional"]), ("numpy", []), ("ember._core.dtypes", ["a"])]


def test_layer_check_catches_an_upward_import():
    """The check is not vacuous: a core module importing autograd is refused."""
    assert layer_of("ember.autograd.engine") > layer_of("ember._core.array")
    assert layer_of("ember") is None


def test_no_import_circles():
    g = ig.graph()
    assert len(g) > 100           # the graph saw the package
    assert ig.cycles(g) == []


def test_circle_finder_finds_circles():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert ig.cycles(g) == [["a", "b", "c"]]
    assert ig.cycles({"a": {"b"}, "b": set()}) == []


# How code reaches the public ops (ember.<name>, with autograd and device dispatch) from
# under the namespace: ember._core.public.ops() returns the ``ember`` module.
_PUBLIC_REACH = ("ember._core.public", "public.ops", "_public_ops", 'sys.modules["ember"]',
                 "sys.modules['ember']")


def _calls_public_ops(text):
    """The lines of `text` that reach the public namespace (comments and docstrings
    naming it do not count: only code lines)."""
    hits = []
    for line in text.splitlines():
        code = line.split("#", 1)[0]
        stripped = code.strip()
        if not stripped or stripped.startswith(('"', "'", "``")):
            continue
        if any(p in code for p in _PUBLIC_REACH):
            hits.append(stripped)
    return hits


def test_gpu_backend_calls_no_public_ops():
    """The GPU backend holds kernels, not composites: an op built from other ember ops is
    written once, in the op's own module, and the GPU dispatch runs that definition (see
    ember/cuda/_dispatch.py).  So no module under ember/cuda reaches the public ops."""
    g = ig.graph()
    cuda = [m for m in g if m == "ember.cuda" or m.startswith("ember.cuda.")]
    assert len(cuda) > 10
    assert [m for m in cuda if "ember._core.public" in g[m]] == []
    mods = ig.module_files()
    bad = {}
    for name in cuda:
        with open(mods[name], encoding="utf-8") as fh:
            hits = _calls_public_ops(fh.read())
        if hits:
            bad[name] = hits
    assert bad == {}, f"ember/cuda calls public ops (write the composite in the op's module): {bad}"


def test_public_ops_finder_finds_calls():
    text = ('"""ember._core.public.ops() is not used here."""\n'
            "from ember._core.public import ops as _public_ops\n"
            "    ember = _public_ops()   # a composite\n"
            "    # ember._core.public.ops() in a comment\n"
            "    e = sys.modules['ember']\n")
    assert _calls_public_ops(text) == ["from ember._core.public import ops as _public_ops",
                                       "ember = _public_ops()", "e = sys.modules['ember']"]
