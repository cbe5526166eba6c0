"""Sphinx extension for ember's API reference.

``.. ember-names::`` lists public names of one namespace (``:module:``, default
``ember``) under a heading of a reference page: it renders a summary table (each name
with the first sentence of its docstring) and then each name's entry from its
docstring (autodoc).  The grouping lives in the reference pages (``docs/api/*.rst``),
as NumPy's does.

At the end of reading, the extension warns (so ``-W`` fails the build):

- for every public name of a documented namespace that no page lists (a new function
  must get a place in the reference), and for a listed name that is not public;
- for every docstring example the reference shows that ``tests/test_docstrings.py``
  does not run (the examples run there, in the suite, not a second time here).

Only public names are used (``__all__``, or the namespace's public attributes), so
moving code between ember's private modules changes nothing here.
"""
import importlib
import importlib.util
import inspect
import os
import re
import types

import numpy
from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

logger = logging.getLogger(__name__)

# the namespaces the reference documents; each public name of each must be listed once
NAMESPACES = ["ember", "ember.linalg", "ember.fft", "ember.random", "ember.emath",
              "ember.lib.stride_tricks", "ember.autograd", "ember.autograd.functional",
              "ember.nn", "ember.nn.functional", "ember.nn.init", "ember.nn.utils",
              "ember.nn.parallel", "ember.optim", "ember.optim.lr_scheduler", "ember.data",
              "ember.distributed", "ember.amp", "ember.cuda", "ember.backends.cudnn",
              "ember.backends.mps", "ember.accelerator", "ember.return_types"]
# names of the top-level namespace that exist only through its module __getattr__
# (loaded on first use, so `import ember` stays quick)
LAZY_TOP_LEVEL = ["save", "load", "float", "int", "long", "short", "cfloat", "sigmoid",
                  "softmax", "log_softmax", "relu", "selu", "celu", "cosine_similarity",
                  "pairwise_distance", "conv1d", "conv2d", "dropout"]
# ember.ndarray's members are listed by `.. ember-array-members::`, not by coverage here


def public_names(ns):
    """The public names of namespace ``ns`` (submodules excluded: each has its own page)."""
    mod = importlib.import_module(ns)
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n in vars(mod) if not n.startswith("_")]
    out = []
    for n in names:
        if n.startswith("_"):
            continue
        obj = getattr(mod, n, None)
        if isinstance(obj, types.ModuleType):
            continue
        if isinstance(obj, types.ModuleType) or (obj is not None and getattr(obj, "__module__", "") in (
                "__future__", "typing")):
            continue
        out.append(n)
    if ns == "ember":
        out += [n for n in LAZY_TOP_LEVEL if n not in out]
    return out


def _summary(obj):
    """The first sentence of obj's docstring as one line of valid reST."""
    doc = inspect.getdoc(obj) if not isinstance(obj, (float, int, bool, type(None))) else None
    if not doc or _is_foreign_type(obj):
        return ""
    para = []
    for line in doc.splitlines():
        if not line.strip() or line.lstrip().startswith(">>>"):
            break
        para.append(line.strip())
    text = " ".join(para)
    # the ufuncs' docstrings open with their own name ("ember.add: elementwise add ...")
    m = re.match(r"ember\.[\w.]+: (.*)", text)
    if m:
        text = m.group(1)[:1].upper() + m.group(1)[1:]
    if text.endswith("::"):
        text = text[:-1]
    # cut after the first sentence, outside inline literals and roles
    for m in re.finditer(r"[.:;](\s|$)", text):
        head = text[:m.start() + 1]
        if head.count("``") % 2 == 0 and head.replace("``", "").count("`") % 2 == 0 \
                and head.count("(") == head.count(")") and m.start() > 20:
            return head if head[-1] == "." else head[:-1] + "."
    return text


def _is_foreign_type(obj):
    """NumPy's scalar types and dtype class, ml_dtypes' bfloat16: their docstrings are
    NumPy's, not ember's, so they get a short entry of ours instead."""
    return isinstance(obj, type) and obj.__module__.split(".")[0] in ("numpy", "ml_dtypes",
                                                                       "builtins")


_CANONICAL = None


def canonical_name(obj):
    """Where ``obj``'s entry is: of the public names of the same object, the one whose
    namespace is nearest the module defining it (``ember.autograd.no_grad`` rather than
    ``ember.no_grad``, ``ember.matmul`` rather than ``ember.linalg.matmul``); the other
    names are documented as aliases of it."""
    global _CANONICAL
    if _CANONICAL is None:
        found = {}
        for ns in NAMESPACES:
            mod = importlib.import_module(ns)
            for name in public_names(ns):
                o = getattr(mod, name, None)
                if callable(o) and not _is_foreign_type(o):
                    found.setdefault(id(o), (o, []))[1].append((ns, name))
        _CANONICAL = {}
        for key, (o, places) in found.items():
            where = getattr(o, "__module__", None) or ""

            def nearness(place):
                ns = place[0]
                return len(ns) if where == ns or where.startswith(ns + ".") else -1
            best = max(places, key=nearness)     # max keeps the first of equals
            _CANONICAL[key] = f"{best[0]}.{best[1]}"
    return _CANONICAL.get(id(obj))


def _own_members(cls):
    """Public methods and properties that ``cls`` itself defines with a docstring."""
    out = []
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        fn = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
        if not (callable(fn) or isinstance(member, property)
                or type(member).__name__ == "getset_descriptor"):
            continue
        if (getattr(fn, "__doc__", None) or "").strip():
            out.append(name)
    return out


def _ufunc_signature(obj):
    args = ", ".join(["x"] if obj.nin == 1 else [f"x{i + 1}" for i in range(obj.nin)])
    return f"({args}, /, out=None, *, where=True, dtype=None)"


def entry_lines(ns, name, obj):
    """reST lines documenting ``ns.name``."""
    full = f"{ns}.{name}"
    ufunc = getattr(importlib.import_module("ember"), "ufunc", None)
    if ufunc is not None and isinstance(obj, ufunc):
        return [f".. autofunction:: {full}{_ufunc_signature(obj)}", ""]
    canon = canonical_name(obj)
    if canon is not None and canon != full:
        role = "class" if isinstance(obj, type) else "func"
        return [f".. py:data:: {name}", f"   :module: {ns}", "",
                f"   The same object as :py:{role}:`{canon}`.", ""]
    if _is_foreign_type(obj):
        return [f".. py:data:: {name}", f"   :module: {ns}", "", f"   {_foreign_text(name, obj)}",
                ""]
    if isinstance(obj, type):
        lines = [f".. autoclass:: {full}"]
        # ember.ndarray's members have their own grouped list (docs/api/array.rst)
        members = _own_members(obj) if full != "ember.ndarray" else []
        if members:
            lines.append(f"   :members: {', '.join(members)}")
        return lines + [""]
    if callable(obj):
        return [f".. autofunction:: {full}", ""]
    return [f".. py:data:: {name}", f"   :module: {ns}", f"   :value: {obj!r}", "",
            f"   {_data_text(ns, name, obj)}", ""]


def _foreign_text(name, obj):
    """One line on a NumPy or Python type that ember re-exports (a dtype, an abstract
    scalar type, a NumPy class)."""
    if obj is numpy.dtype:
        return "NumPy's dtype class: ember's dtypes are NumPy's dtype objects."
    if obj.__module__ == "builtins":
        return (f"Python's ``{obj.__name__}`` (PyTorch's ``torch.Size``: shapes are tuples)."
                if name == "Size" else f"Python's ``{obj.__name__}``.")
    if isinstance(obj, type) and issubclass(obj, numpy.generic):
        try:
            dt = numpy.dtype(obj)
        except TypeError:
            dt = None
        if dt is None or obj.__name__ in ("generic", "number", "integer", "signedinteger",
                                          "unsignedinteger", "floating", "complexfloating",
                                          "inexact"):
            return (f"NumPy's abstract scalar type ``numpy.{obj.__name__}``, for "
                    f"``issubdtype`` and ``isdtype``.")
        bits = dt.itemsize * 8
        kind = {"b": "Boolean (True or False)", "i": f"{bits}-bit signed integer",
                "u": f"{bits}-bit unsigned integer",
                "f": f"{bits}-bit IEEE floating point",
                "c": f"complex number of two {bits // 2}-bit floats"}.get(dt.kind, dt.name)
        if dt.name == "bfloat16":
            kind = ("16-bit brain floating point (float32's 8-bit exponent, a 7-bit "
                    "fraction), ml_dtypes' dtype")
        if name != dt.name:
            return f"Another name of ``{dt.name}``: {kind}."
        return kind[:1].upper() + kind[1:] + "."
    mod = ".".join(obj.__module__.split(".")[:2]) if obj.__module__.startswith(
        ("numpy.random", "numpy.linalg")) else obj.__module__.split(".")[0]
    return f"``{mod}.{obj.__name__}``, re-exported (ember uses NumPy's)."


def _data_text(ns, name, obj):
    if obj is None and name == "newaxis":
        return "``None``, for indexing: ``x[:, newaxis]`` adds an axis of length 1."
    if isinstance(obj, float):
        return "A Python float constant, as in NumPy."
    if isinstance(obj, bool):
        return "A flag (read and set it as an attribute, as in PyTorch)."
    return f"A module-level value of ``{ns}``."


class EmberNames(SphinxDirective):
    """Summary table and entries for the listed public names of one namespace."""
    has_content = True
    option_spec = {"module": directives.unchanged}

    def run(self):
        ns = self.options.get("module", "ember")
        mod = importlib.import_module(ns)
        names = " ".join(self.content).split()
        env = self.env
        listed = env.ember_api_listed = getattr(env, "ember_api_listed", {})
        rows = [".. list-table::", "   :widths: 30 70", "   :class: ember-summary", ""]
        entries = []
        for name in names:
            listed.setdefault((ns, name), []).append(env.docname)
            if not hasattr(mod, name):
                logger.warning(f"ember-names: {ns}.{name} is not defined (listed in "
                               f"{env.docname})", location=self.get_location())
                continue
            obj = getattr(mod, name)
            target = "data" if (_is_foreign_type(obj) or not (callable(obj) or isinstance(obj, type))) \
                else ("class" if isinstance(obj, type) else "func")
            summary = (_foreign_text(name, obj) if _is_foreign_type(obj) else _summary(obj)) or (
                _data_text(ns, name, obj) if target == "data" else "")
            canon = canonical_name(obj)
            if canon is not None and canon != f"{ns}.{name}":
                summary = f"The same as :py:obj:`{canon}`."
            rows += [f"   * - :py:{'obj'}:`{name} <{ns}.{name}>`", f"     - {summary}"]
            entries += entry_lines(ns, name, obj)
        text = rows + [""] + entries
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(text, source=env.docname), node)
        return node.children


class ArrayMembers(SphinxDirective):
    """ember.ndarray's public members, grouped: documented ones from their docstrings,
    the rest as the method form of the ember function of the same name."""
    has_content = True
    option_spec = {"title-level": directives.unchanged}

    def run(self):
        import ember
        cls = ember.ndarray
        groups = []          # (title, [names])
        current = None
        for line in self.content:
            if line.strip().startswith("#"):
                current = (line.strip("# ").strip(), [])
                groups.append(current)
            elif line.strip():
                current[1].extend(line.split())
        env = self.env
        env.ember_array_listed = set(getattr(env, "ember_array_listed", set()))
        text = []
        for title, names in groups:
            text += [title, "-" * len(title), ""]
            rows = [".. list-table::", "   :widths: 30 70", "   :class: ember-summary", ""]
            entries = []
            for name in names:
                env.ember_array_listed.add(name)
                member = inspect.getattr_static(cls, name, None)
                if member is None:
                    logger.warning(f"ember-array-members: ndarray.{name} is not defined",
                                   location=self.get_location())
                    continue
                value = getattr(cls, name)
                is_attr = not callable(value) or type(member).__name__ == "getset_descriptor" \
                    or isinstance(member, property)
                doc = (getattr(value, "__doc__", None) or "").strip() if not is_attr else (
                    getattr(member, "__doc__", None) or "").strip()
                role = "attr" if is_attr else "meth"
                summary = _summary(member if is_attr else value) if doc else ""
                func = getattr(ember, name, None)
                if not doc:
                    if not is_attr and func is not None and callable(func) \
                            and not isinstance(func, type):
                        summary = f"Method form of :func:`ember.{name}`."
                    elif hasattr(numpy.ndarray, name):
                        summary = f"As NumPy's ``ndarray.{name}``."
                    else:
                        summary = f"As PyTorch's ``Tensor.{name}``."
                rows += [f"   * - :py:{role}:`{name} <ember.ndarray.{name}>`",
                         f"     - {summary}"]
                if is_attr:
                    # the docstring as written (autodoc's napoleon would read an
                    # attribute docstring's first "x: y" as a type and a description)
                    body = inspect.cleandoc(doc).splitlines() if doc else [summary]
                    entries += [f".. py:attribute:: ndarray.{name}", "   :module: ember", ""]
                    entries += [("   " + b) if b.strip() else "" for b in body] + [""]
                elif doc:
                    entries += [f".. automethod:: ember.ndarray.{name}", ""]
                else:
                    try:
                        sig = str(inspect.signature(value))
                        sig = sig.replace("(self, ", "(").replace("(self)", "()")
                    except (TypeError, ValueError):
                        sig = "(*args, **kwargs)"
                    entries += [f".. py:method:: ndarray.{name}{sig}", "   :module: ember", "",
                                f"   {summary}", ""]
            text += rows + [""] + entries
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(text, source=env.docname), node)
        return node.children


def _purge(app, env, docname):
    listed = getattr(env, "ember_api_listed", {})
    for key in list(listed):
        listed[key] = [d for d in listed[key] if d != docname]
        if not listed[key]:
            del listed[key]


def _merge(app, env, docnames, other):
    listed = env.ember_api_listed = getattr(env, "ember_api_listed", {})
    for key, docs in getattr(other, "ember_api_listed", {}).items():
        listed.setdefault(key, []).extend(docs)
    env.ember_array_listed = set(getattr(env, "ember_array_listed", set())) | set(
        getattr(other, "ember_array_listed", set()))


def _test_docstrings_docs(srcdir):
    """The docstrings whose examples tests/test_docstrings.py runs (by identity of text)."""
    root = os.path.dirname(os.path.abspath(srcdir))
    found = []
    for dirpath, _dirs, files in os.walk(os.path.join(root, "tests")):
        if "test_docstrings.py" in files:
            found.append(os.path.join(dirpath, "test_docstrings.py"))
    if len(found) != 1:
        return None
    spec = importlib.util.spec_from_file_location("_ember_test_docstrings", found[0])
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except ImportError as e:         # pytest is the test extra's, not the docs extra's
        logger.info(f"API reference: examples' coverage not checked ({e})")
        return set()
    docs = set()
    for p in mod._examples():
        test = p.values[0] if hasattr(p, "values") else p
        docs.add(test.docstring)
    return docs


def _check(app, env):
    listed = getattr(env, "ember_api_listed", {})
    for (ns, name), docs in sorted(listed.items()):
        if len(docs) > 1:
            logger.warning(f"ember-names: {ns}.{name} is listed on several pages: {docs}")
    shown = []
    for ns in NAMESPACES:
        for name in public_names(ns):
            if (ns, name) not in listed:
                logger.warning(f"API reference: public name {ns}.{name} is on no page; add it "
                               f"to an `.. ember-names::` list in docs/api/*.rst")
            else:
                shown.append(getattr(importlib.import_module(ns), name, None))
        mod = importlib.import_module(ns)
        public = set(public_names(ns))
        for (lns, name) in listed:
            if lns == ns and name not in public and hasattr(mod, name):
                logger.warning(f"API reference: {ns}.{name} is listed but not public "
                               f"(not in {ns}.__all__)")
    import ember
    array_public = {n for n in dir(ember.ndarray) if not n.startswith("_")}
    array_listed = getattr(env, "ember_array_listed", set())
    for name in sorted(array_public - array_listed):
        logger.warning(f"API reference: ember.ndarray.{name} is on no page; add it to the "
                       f"`.. ember-array-members::` list in docs/api/array.rst")
    # the docstring examples the reference shows are run by tests/test_docstrings.py
    ran = _test_docstrings_docs(app.srcdir)
    if ran == set():
        return
    if ran is None:
        logger.warning("API reference: tests/test_docstrings.py not found (exactly one), so "
                       "the docstring examples' coverage cannot be checked")
        return
    for obj in shown + [ember.ndarray]:
        doc = getattr(obj, "__doc__", None)
        if isinstance(doc, str) and ">>>" in doc and doc not in ran and not _is_foreign_type(obj):
            logger.warning(f"API reference: the examples in the docstring of "
                           f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', obj)} "
                           f"are shown but tests/test_docstrings.py does not run them")


def setup(app):
    app.add_directive("ember-names", EmberNames)
    app.add_directive("ember-array-members", ArrayMembers)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-check-consistency", _check)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
