"""ember's import graph between its Python files, read with `ast` (nothing is imported).

An edge ``a -> b`` is any ``import b`` / ``from b import x`` in file ``a``, at module level
or inside a function (a lazy import is still a dependency), where ``from p import m``
names the submodule ``p.m`` when ``m`` is a file or package of its own.
``importlib.import_module("literal")`` counts too.  Cython files (``.pyx``) are nodes
as well, with their ``import`` / ``cimport`` lines read by a regular expression.

The root package ``ember`` (``ember/__init__.py``) is left out: it is the public
namespace assembled from every layer (it imports all of them), and the layers above
the namespace reach public ops through it; import-linter's contracts (pyproject.toml)
keep every layer under the namespace from importing it.

Run ``python tests/import_graph.py`` to print the circles (strongly connected groups of
files that import each other, directly or through others); it exits 1 if there are any.
"""
import ast
import functools
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ember")


def module_files(root=ROOT):
    """{dotted module name: path} for every .py file under ``root``."""
    out = {}
    base = os.path.dirname(os.path.abspath(root))
    for d, _, files in os.walk(root):
        for f in files:
            if not f.endswith((".py", ".pyx")):
                continue
            path = os.path.join(d, f)
            rel = os.path.splitext(os.path.relpath(path, base))[0].replace(os.sep, ".")
            if rel.endswith(".__init__"):
                rel = rel[: -len(".__init__")]
            out[rel] = path
    return out


def _package_of(name, path):
    return name if path.endswith("__init__.py") else name.rpartition(".")[0]


def _known(mods, name):
    """The longest prefix of ``name`` that is an ember module (or None)."""
    while name:
        if name in mods:
            return name
        name = name.rpartition(".")[0]
    return None




# a Cython file's import lines: "import a.b", "cimport a.b", "from a.b cimport x, y",
# "from a.b import (x, y" (indented ones inside functions too)
_PYX_IMPORT = re.compile(r"^[ \t]*(?:(?:c?import)[ \t]+([\w.]+)|from[ \t]+([\w.]+)[ \t]+"
                         r"c?import[ \t]+\(?([\w, \t]+))", re.M)


def cython_imports(text):
    """The modules a Cython source imports or cimports: (module, [names]) pairs."""
    out = []
    for m in _PYX_IMPORT.finditer(text):
        if m.group(1):
            out.append((m.group(1), []))
        else:
            out.append((m.group(2), [n.strip().split(" ")[0] for n in m.group(3).split(",")
                                     if n.strip()]))
    return out


def _pyx_imports(name, path, mods):
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    found = set()
    for src, names in cython_imports(text):
        for t in ([src + "." + n for n in names] or [src]) if names else [src]:
            t = t if t in mods else src
            if t == "ember" or t.startswith("ember."):
                k = _known(mods, t)
                if k is not None and k != name:
                    found.add(k)
    return found


def imports_of(name, path, mods):
    """The set of ember modules file ``path`` (module ``name``) imports."""
    if path.endswith(".pyx"):
        return _pyx_imports(name, path, mods)
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    pkg = _package_of(name, path)
    found = set()
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                src = base + ("." + node.module if node.module else "")
            else:
                src = node.module or ""
            for a in node.names:
                sub = src + "." + a.name
                targets.append(sub if sub in mods else src)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            targets = [node.args[0].value]
        for t in targets:
            if t == "ember" or t.startswith("ember."):
                k = _known(mods, t)
                if k is not None and k != name:
                    found.add(k)
    return found


@functools.lru_cache(maxsize=None)
def graph(root=ROOT, with_root=False):
    """{module: set of modules it imports}; the root package only with `with_root`
    (built once per process: do not change it)."""
    mods = module_files(root)
    g = {name: imports_of(name, path, mods) for name, path in mods.items()}
    if not with_root:
        g.pop("ember", None)
        for deps in g.values():
            deps.discard("ember")
    return g


def cycles(g):
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for start in sorted(g):
        if start in index:
            continue
        work = [(start, iter(sorted(g[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in g:
                    continue
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return sorted(out)


def main():
    g = graph()
    cs = cycles(g)
    for c in cs:
        print(f"circle of {len(c)} files:")
        members = set(c)
        for m in c:
            print(f"  {m} -> {', '.join(sorted(g[m] & members))}")
    print(f"{len(cs)} circle(s)")
    return 1 if cs else 0


if __name__ == "__main__":
    sys.exit(main())
