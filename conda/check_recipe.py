"""Check conda/recipe.yaml without a conda build tool, and the sdist it builds from.

Static part (a second):
  - the recipe's version equals meson.build's project() version, the one place it is
    written (pyproject.toml declares it dynamic, ember.__version__ reads the build record);
  - its host requirements are pyproject.toml's [build-system] requires, its run
    requirements [project] dependencies, its run_constraints the `cuda` and `mpi` extras
    (conda-forge names and version bounds), its license and license file pyproject's;
  - the files its tests copy are tracked by git; its source is the sdist's file name.
Build part (one compile of ember, about 2 minutes on 2 idle cores):
  - a fresh virtual environment gets the recipe's host requirements (from PyPI) and `build`;
  - `python -m build --sdist` there (meson-python: `meson dist`, the git-tracked files);
  - the sdist holds every tracked file the build needs and nothing generated;
  - the recipe's build script runs in the unpacked sdist (not a git tree), then the run
    requirements are installed; `pip check`;
  - the installed files (the wheel's RECORD) hold every ember subpackage, every tracked
    .py/.pxd/.cu file, every compiled module meson.build lists and the build record;
  - the recipe's tests run there: its imports, and its script commands (show_config,
    the listed pytest files) in a directory holding only the files it copies.

Usage: python conda/check_recipe.py [--static-only] [--keep]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

try:
    import tomllib
except ImportError:                                    # Python 3.10
    import tomli as tomllib
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = os.path.join(ROOT, "conda", "recipe.yaml")

# conda-forge name -> PyPI name, where they differ (PyPI names compared normalised)
CONDA_TO_PYPI = {"cupy": "cupy-cuda13x", "cudnn": "nvidia-cudnn-cu13"}
# host entries that are conda tooling, not build-system requires
HOST_TOOLING = {"python", "pip"}


class CheckError(Exception):
    pass


def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def split_req(req):
    """'numpy >=2.0' or 'numpy>=2.0' -> ('numpy', '>=2.0')."""
    m = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*(.*)$", req)
    if not m:
        raise CheckError(f"cannot parse requirement {req!r}")
    return norm(m.group(1)), m.group(2).replace(" ", "")


def flatten(items, platform="linux"):
    """A rattler-build list with `if:`/`then:`/`else:` entries, for one platform."""
    selectors = {"linux": platform == "linux", "osx": platform == "osx", "win": platform == "win",
                 "unix": platform != "win", "build_platform != target_platform": False}
    out = []
    for it in items or []:
        if isinstance(it, dict) and "if" in it:
            if it["if"] not in selectors:
                raise CheckError(f"unknown selector {it['if']!r}: teach check_recipe.py")
            branch = it.get("then") if selectors[it["if"]] else it.get("else")
            out += flatten(branch if isinstance(branch, list) else [branch] if branch else [],
                           platform)
        else:
            out.append(it)
    return out


def render(text, context):
    """Substitute ${{ name }} context variables (the only templating the checks need)."""
    return re.sub(r"\$\{\{\s*(\w+)\s*\}\}", lambda m: str(context.get(m.group(1), m.group(0))),
                  text)


def meson_version():
    with open(os.path.join(ROOT, "meson.build")) as f:
        m = re.search(r"project\(.*?version\s*:\s*'([^']+)'", f.read(), re.S)
    if not m:
        raise CheckError("meson.build: no version in project()")
    return m.group(1)


def git_files():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    return [f for f in out if os.path.exists(os.path.join(ROOT, f))]


def load():
    with open(RECIPE) as f:
        recipe = yaml.safe_load(f)
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        pyproject = tomllib.load(f)
    return recipe, pyproject


def check_static(recipe, pyproject):
    errors = []
    ctx = recipe.get("context", {})
    version = str(ctx.get("version"))
    mv = meson_version()
    project = pyproject["project"]
    if recipe.get("schema_version") != 1:
        errors.append(f"schema_version is {recipe.get('schema_version')!r}, expected 1")
    if version != mv:
        errors.append(f"recipe version {version} != meson.build version {mv}")
    if "version" in project and project["version"] != mv:
        errors.append(f"pyproject version {project['version']} != meson.build version {mv}")
    if "version" not in project and "version" not in project.get("dynamic", []):
        errors.append("pyproject.toml: no version and version not dynamic")
    name = render(recipe["package"]["name"], ctx)
    if norm(name) != norm(project["name"]):
        errors.append(f"package name {name} != pyproject name {project['name']}")

    reqs = recipe["requirements"]
    for platform in ("linux", "osx"):
        host = dict(split_req(r) for r in flatten(reqs["host"], platform))
        want = dict(split_req(r) for r in pyproject["build-system"]["requires"])
        for n, spec in want.items():
            if host.get(n) != spec:
                errors.append(f"[{platform}] host requirement {n}{spec} (pyproject "
                              f"build-system) is {n + host[n] if n in host else 'missing'}")
        extra = set(host) - set(want) - HOST_TOOLING - {"ninja", "llvm-openmp"}
        if extra:
            errors.append(f"[{platform}] host requirements not in build-system requires: {extra}")
        run = dict(split_req(r) for r in flatten(reqs["run"], platform))
        run_py = run.pop("python", None)
        deps = dict(split_req(r) for r in project["dependencies"])
        if run != deps:
            errors.append(f"[{platform}] run requirements {run} != pyproject dependencies {deps}")
        if run_py not in ("", project["requires-python"].replace(" ", "")):
            errors.append(f"run python{run_py} != requires-python {project['requires-python']}")
    build = [r for r in flatten(reqs["build"]) if isinstance(r, str)]
    for needed in ("${{ compiler('c') }}", "${{ stdlib('c') }}"):
        if needed not in build:
            errors.append(f"build requirements lack {needed}")
    osx_host = [split_req(r)[0] for r in flatten(reqs["host"], "osx")]
    if "llvm-openmp" not in osx_host:
        errors.append("macOS host requirements lack llvm-openmp (OpenMP for clang)")

    constraints = dict(split_req(r) for r in reqs.get("run_constraints", []))
    extras = project["optional-dependencies"]
    for extra in ("cuda", "mpi"):
        for n, spec in (split_req(r) for r in extras[extra]):
            conda = {v: k for k, v in CONDA_TO_PYPI.items()}.get(n, n)
            if constraints.get(conda) != spec:
                errors.append(f"extra [{extra}] {n}{spec}: run_constraints has "
                              f"{conda + constraints[conda] if conda in constraints else 'nothing'}")

    about = recipe["about"]
    lic = project["license"]["text"] if isinstance(project["license"], dict) else project["license"]
    if about.get("license") != lic:
        errors.append(f"license {about.get('license')} != pyproject {lic}")
    tracked = set(git_files())
    if about.get("license_file") not in tracked:
        errors.append(f"license_file {about.get('license_file')} is not a tracked file")
    for t in recipe["tests"]:
        for f in t.get("files", {}).get("source", []):
            if f not in tracked:
                errors.append(f"test file {f} is not tracked by git (not in the sdist)")
    src = render(recipe["source"]["path"], ctx)
    if os.path.normpath(os.path.join("conda", src)) != os.path.join("dist", f"{name}-{mv}.tar.gz"):
        errors.append(f"source path {src} is not ../dist/{name}-{mv}.tar.gz")
    if errors:
        raise CheckError("recipe disagrees with the project:\n  " + "\n  ".join(errors))
    return mv


def run(cmd, cwd=None, env=None, log=None):
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, env=env, text=True, shell=isinstance(cmd, str),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if log:
        with open(log, "w") as f:
            f.write(r.stdout)
    if r.returncode:
        raise CheckError(f"failed ({r.returncode}): {cmd}\n{r.stdout[-6000:]}")
    return r.stdout, time.perf_counter() - t


def check_sdist(sdist, name, version):
    tracked = git_files()
    with tarfile.open(sdist) as tf:
        members = tf.getnames()
    prefix = f"{name}-{version}/"
    inside = {m[len(prefix):] for m in members if m.startswith(prefix)}
    needed = [f for f in tracked if f.startswith(("ember/", "tests/")) or
              f in ("meson.build", "meson.options", "pyproject.toml", "LICENSE", "README.md")]
    missing = [f for f in needed if f not in inside]
    # a tracked .c file is source (benchmarks/fma_peak.c); an untracked one is Cython output
    generated = [f for f in inside if (f.endswith((".so", ".c", ".pyc")) and f not in tracked)
                 or f in ("ember/_build_config.py", "ember/_core/opcodes.pxd")
                 or (re.match(r"ember/_kernels/cpu/_loops_", f) and f not in tracked)]
    if missing or generated:
        raise CheckError(f"sdist {os.path.basename(sdist)}: missing {missing[:20]}, "
                         f"generated files in it {generated[:20]}")


def check_installed(py, tracked):
    code = ("import importlib.metadata as m, json; "
            "print(json.dumps([str(p) for p in m.files('ember')]))")
    import json
    files = set(json.loads(run([py, "-c", code])[0]))
    problems = []
    for f in tracked:
        if f.startswith("ember/") and f.endswith((".py", ".pxd", ".pyx", ".cu", ".h", ".pyi",
                                                  "py.typed")) \
                and f not in files:
            problems.append(f"missing {f}")
    pkgs = {os.path.dirname(f) for f in tracked
            if f.startswith("ember/") and f.endswith("/__init__.py")}
    for p in sorted(pkgs):
        if p + "/__init__.py" not in files:
            problems.append(f"missing subpackage {p}")
    with open(os.path.join(ROOT, "ember", "meson.build")) as f:
        mods = re.findall(r"\['(ember/[\w/]+)', '(\w+)', '[\w/]+\.pyx'\]", f.read())
    exts = [f for f in files if f.endswith(".so") or f.endswith(".pyd")]
    for d, m in mods:
        if not any(e.startswith(f"{d}/{m}.") for e in exts):
            problems.append(f"missing compiled module {d}/{m}")
    if not any(re.match(r"ember/_kernels/cpu/_loops_ops0\.", e) for e in exts):
        problems.append("missing generated loops ember/_kernels/cpu/_loops_ops0")
    if "ember/_build_config.py" not in files:
        problems.append("missing ember/_build_config.py (the build record)")
    if "ember/_core/opcodes.pxd" not in files:
        problems.append("missing ember/_core/opcodes.pxd (generated from the op table)")
    if problems:
        raise CheckError("installed ember (the wheel's RECORD):\n  " + "\n  ".join(problems))
    return len(files), len(exts), len(pkgs)


def check_build(recipe, version, keep):
    name = recipe["package"]["name"]
    name = render(name, recipe["context"])
    tmp = tempfile.mkdtemp(prefix="ember-recipe-")
    timings = {}
    try:
        venv = os.path.join(tmp, "venv")
        _, timings["venv"] = run([sys.executable, "-m", "venv", venv])
        py = os.path.join(venv, "bin", "python")
        env = {k: v for k, v in os.environ.items()
               if k not in ("VIRTUAL_ENV", "PYTHONPATH") and not k.startswith("EMBER_")}
        env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
        reqs = recipe["requirements"]
        host = [pypi(r) for r in flatten(reqs["host"]) if split_req(r)[0] not in HOST_TOOLING]
        # the host requirements are the build-system requires (checked above), so the sdist
        # is made in the same environment, without a second, isolated one
        _, timings["host_reqs"] = run([py, "-m", "pip", "install", "-q", "build"] + host,
                                      env=env)
        _, timings["sdist"] = run([py, "-m", "build", "--sdist", "--no-isolation", "--outdir",
                                   os.path.join(tmp, "dist"), ROOT], env=env,
                                  log=os.path.join(tmp, "sdist.log"))
        sdist = os.path.join(tmp, "dist", f"{name}-{version}.tar.gz")
        if not os.path.exists(sdist):
            raise CheckError(f"python -m build --sdist made {os.listdir(os.path.dirname(sdist))}")
        check_sdist(sdist, name, version)
        with tarfile.open(sdist) as tf:
            if hasattr(tarfile, "data_filter"):
                tf.extractall(os.path.join(tmp, "src"), filter="data")
            else:                                      # Python < 3.11.4
                tf.extractall(os.path.join(tmp, "src"))
        src = os.path.join(tmp, "src", f"{name}-{version}")
        script = recipe["build"]["script"]
        script = re.sub(r"\$\{\{\s*PYTHON\s*\}\}", py, script)
        _, timings["build_script"] = run(script, cwd=src, env=env,
                                         log=os.path.join(tmp, "build.log"))
        test_reqs = [r for t in recipe["tests"] for r in t.get("requirements", {}).get("run", [])]
        run_reqs = [pypi(r) for r in flatten(reqs["run"]) if split_req(r)[0] != "python"]
        _, timings["run_reqs"] = run([py, "-m", "pip", "install", "-q"] + run_reqs +
                                     [pypi(r) for r in test_reqs], env=env)
        nfiles, nexts, npkgs = check_installed(py, git_files())

        t0 = time.perf_counter()
        for t in recipe["tests"]:
            work = tempfile.mkdtemp(dir=tmp, prefix="test-")
            if "python" in t:
                for mod in t["python"].get("imports", []):
                    run([py, "-c", f"import {mod}"], cwd=work, env=env)
                if t["python"].get("pip_check", True):
                    run([py, "-m", "pip", "check"], cwd=work, env=env)
            for f in t.get("files", {}).get("source", []):
                os.makedirs(os.path.join(work, os.path.dirname(f)), exist_ok=True)
                shutil.copy(os.path.join(src, f), os.path.join(work, f))
            for cmd in t.get("script", []):
                out, _ = run(cmd, cwd=work, env=env)
                if cmd.startswith("pytest"):
                    print("   ", cmd, "->", out.strip().splitlines()[-1])
        timings["tests"] = time.perf_counter() - t0
        print(f"  sdist {os.path.basename(sdist)} built from git-tracked files and built from "
              f"(not a git tree); installed: {nfiles} files, {nexts} compiled modules, "
              f"{npkgs} packages")
        print("  seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))
    finally:
        if keep:
            print(f"  kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def pypi(req):
    n, spec = split_req(req)
    return CONDA_TO_PYPI.get(n, n) + spec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--static-only", action="store_true",
                    help="only compare the recipe with pyproject.toml and meson.build")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    t = time.perf_counter()
    try:
        recipe, pyproject = load()
        version = check_static(recipe, pyproject)
        print(f"conda/recipe.yaml agrees with pyproject.toml and meson.build (version {version})")
        if not args.static_only:
            check_build(recipe, version, args.keep)
    except CheckError as err:
        print(f"check_recipe: {err}", file=sys.stderr)
        return 1
    import resource
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"check_recipe: ok ({time.perf_counter() - t:.0f} s; CPU time of its processes "
          f"{kids.ru_utime + kids.ru_stime:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
