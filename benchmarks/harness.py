"""Shared timing code for ember's benchmarks.

Methodology (see README.md):

* Every case is timed for ember, NumPy and PyTorch (CPU) in the same process and
  the same run, interleaved: each repetition runs one timed batch of every
  library, in an order that rotates from one repetition to the next, so that
  drift on a shared, noisy machine (other jobs, frequency changes, page-cache
  state) hits all libraries alike.
* A timed batch runs the statement ``number`` times in a tight loop compiled
  for the purpose (the statement's names are function locals, as ``timeit``
  does), timed with ``time.perf_counter_ns``; the per-call time is the batch
  time divided by ``number``.  The garbage collector is off while a batch runs
  (reference counting still frees every temporary at once).
* Each statement is run a few times untimed first (warm-up; this also checks
  that it works: a statement that raises makes that library's cell
  ``n/a (error: ...)`` and the rest of the case still runs).
* The reported figure is the MEDIAN over the repetitions.
"""
import datetime
import gc
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

try:  # PyTorch is optional: without it the torch column reads "n/a".
    import torch
    torch.set_num_threads(2)
except Exception:  # pragma: no cover - depends on the environment
    torch = None

LIBS = ("ember", "numpy", "torch")
LIB_TITLES = {"ember": "ember", "numpy": "NumPy", "torch": "PyTorch"}


# ----------------------------------------------------------------- timing

def make_timer(stmt, ns):
    """Compile ``stmt`` into ``f(number) -> elapsed ns`` for ``number`` runs.

    The names of ``ns`` become locals of the compiled function, so looking
    them up costs the same (next to nothing) for every library.
    """
    names = [k for k in ns if k.isidentifier() and not k.startswith("__")]
    lines = ["def _bench_inner(_ns, _n, _clock):"]
    lines += [f"    {k} = _ns[{k!r}]" for k in names]
    lines += ["    _t0 = _clock()",
              "    for _i in range(_n):"]
    lines += [f"        {s}" for s in stmt.split("\n")]
    lines += ["    return _clock() - _t0"]
    code = compile("\n".join(lines), f"<bench: {stmt}>", "exec")
    glb = {}
    exec(code, glb)
    inner = glb["_bench_inner"]
    clock = time.perf_counter_ns

    def run(number):
        return inner(ns, number, clock)
    return run


def _short_error(exc, limit=70):
    msg = f"{type(exc).__name__}: {exc}".replace("\n", " ").replace("|", "/")
    return msg if len(msg) <= limit else msg[:limit - 3] + "..."


def interleaved(impls, number, repeat, warmup=3, hooks=None, settle=None, blas_settle=0.0):
    """Time several implementations of one case, interleaved.

    ``impls`` maps a label to ``(stmt, ns)`` (``stmt`` a Python statement,
    ``ns`` the names it uses) or to ``None`` (not available).  Returns
    ``(times, errors)``: ``times[label]`` is the median seconds per call (None
    when unavailable or failing), ``errors[label]`` a short message then.
    ``hooks`` optionally maps a label to ``(before, after)`` callables run,
    untimed, around each of its batches (and its warm-up), e.g. to switch a
    setting on for that label only.  ``blas_settle`` (seconds) pauses after NumPy's
    batches for cases where NumPy runs threaded BLAS (its idle OpenBLAS workers spin
    for about 2**28 cycles, ~0.1 s, and take the cores of whatever runs next: ember's
    1024^3 GEMM measured 23 ms right after NumPy's and 11 ms otherwise).
    """
    hooks = hooks or {}
    nohook = (lambda: None, lambda: None)
    if settle is None:
        settle = 0.03 if number == 1 else 0.0      # long single calls: pause between batches
    timers, errors = {}, {}
    for label, impl in impls.items():
        if impl is None:
            errors[label] = "not installed"
            continue
        stmt, ns = impl
        try:
            t = make_timer(stmt, ns)
            before, after = hooks.get(label, nohook)
            before()
            try:
                t(warmup)
            finally:
                after()
            timers[label] = t
        except Exception as exc:  # a missing or broken function: report, go on
            errors[label] = _short_error(exc)
    samples = {label: [] for label in timers}
    order = list(timers)
    prev = None
    gc_was_enabled = gc.isenabled()
    try:
        for rep in range(repeat):
            k = rep % len(order) if order else 0
            for label in order[k:] + order[:k]:       # rotate: nobody always goes first
                if label in errors:
                    continue
                if settle and prev in ("PyTorch", "torch"):
                    # let the previous library's threads stop spinning (PyTorch's OpenMP
                    # workers spin for milliseconds after a call and steal the cores of
                    # whatever runs next: 10 ms of sgemm measured 18 ms right after torch)
                    time.sleep(settle)
                elif blas_settle and prev in ("NumPy", "numpy"):
                    time.sleep(blas_settle)
                prev = label
                before, after = hooks.get(label, nohook)
                before()
                gc.disable()
                try:
                    elapsed = timers[label](number)
                except Exception as exc:
                    errors[label] = _short_error(exc)
                    continue
                finally:
                    if gc_was_enabled:
                        gc.enable()
                    after()
                samples[label].append(elapsed / number * 1e-9)
    finally:
        if gc_was_enabled:
            gc.enable()
    times = {}
    for label in impls:
        s = samples.get(label)
        times[label] = statistics.median(s) if s and label not in errors else None
    return times, errors


# ----------------------------------------------------------------- checks

def to_numpy(x):
    """A NumPy copy of an ember array, NumPy array, torch tensor or scalar."""
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def check_results(exprs, ns_by_lib, rtol=1e-4, atol=1e-3):
    """Evaluate each library's expression once and compare with NumPy's.

    Returns {lib: message} for libraries whose result differs (or fails).
    """
    problems = {}
    results = {}
    for lib, expr in exprs.items():
        if expr is None or ns_by_lib.get(lib) is None:
            continue
        try:
            results[lib] = to_numpy(eval(expr, {}, dict(ns_by_lib[lib])))
        except Exception as exc:
            problems[lib] = _short_error(exc)
    ref = results.get("numpy")
    if ref is None:
        return problems
    for lib, r in results.items():
        if lib == "numpy":
            continue
        if r.shape != ref.shape or not np.allclose(r.astype(np.float64), ref.astype(np.float64),
                                                   rtol=rtol, atol=atol * max(1.0, float(np.abs(ref).max(initial=0)))):
            problems[lib] = "result differs from NumPy's"
    return problems


# ----------------------------------------------------------------- rows

def make_row(case, times, errors, targets=(), work=None, unit="GB/s", note=""):
    """One result row.

    ``targets``: tuples ``(reference, factor)`` with reference ``"numpy"``,
    ``"torch"`` or ``"best"`` (the faster of NumPy and PyTorch): the target is
    ember's time <= factor x the reference's.  ``met`` is True/False, or None
    when a time is missing.
    """
    def ratio(ref):
        e, r = times.get("ember"), times.get(ref)
        return e / r if e and r else None

    best = [t for t in (times.get("numpy"), times.get("torch")) if t]
    refs = {"numpy": times.get("numpy"), "torch": times.get("torch"),
            "best": min(best) if best else None}
    met = None
    target_parts = []
    if targets:
        met = True
        for ref, factor in targets:
            target_parts.append(f"<= {factor:g}x " + {"numpy": "NumPy", "torch": "PyTorch",
                                                    "best": "min(NumPy, PyTorch)"}[ref])
            e, r = times.get("ember"), refs[ref]
            if e is None or r is None:
                met = None
                break
            if e > factor * r:
                met = False
        if times.get("ember") and "ember" in errors:   # ran, but gave a wrong result
            met = None
    rate = {}
    if work:  # bytes (unit GB/s) or flops (unit GFLOP/s) per call
        for lib, t in times.items():
            if t:
                rate[lib] = work / t / 1e9
    return {
        "case": case,
        "times": dict(times),
        "errors": dict(errors),
        "ratio_numpy": ratio("numpy"),
        "ratio_torch": ratio("torch"),
        "ratio_best": (times["ember"] / refs["best"]) if times.get("ember") and refs["best"] else None,
        "target": ", ".join(target_parts) if target_parts else "-",
        "met": met,
        "rate": rate,
        "rate_unit": unit,
        "note": note,
    }


# ----------------------------------------------------------------- formatting

def fmt_time(t):
    if t is None:
        return "n/a"
    if t < 1e-6:
        return f"{t * 1e9:.0f} ns"
    if t < 1e-3:
        return f"{t * 1e6:.2f} us"
    if t < 1:
        return f"{t * 1e3:.2f} ms"
    return f"{t:.2f} s"


def fmt_cell(row, lib):
    t = row["times"].get(lib)
    if t is None:
        err = row["errors"].get(lib, "")
        return f"n/a (error: {err})" if err and err != "not installed" else "n/a"
    s = fmt_time(t)
    if lib in row["rate"]:
        s += f" ({row['rate'][lib]:.1f} {row['rate_unit']})"
    if lib in row["errors"]:  # a result check failed although it ran
        s += f" [{row['errors'][lib]}]"
    return s


def fmt_ratio(r):
    return "n/a" if r is None else f"{r:.2f}x"


def fmt_met(m):
    return {True: "yes", False: "**no**", None: "n/a"}[m]


def markdown_table(rows):
    head = ("| case | ember | NumPy | PyTorch | ember/NumPy | ember/PyTorch | target | met? |\n"
            "|---|---|---|---|---|---|---|---|")
    out = [head]
    for r in rows:
        met = "-" if r["target"] == "-" else fmt_met(r["met"])
        target = r["target"]
        if "min(NumPy, PyTorch)" in target and r["ratio_best"] is not None:
            target += f" (ember/min = {r['ratio_best']:.2f}x)"
        out.append(f"| {r['case']} | {fmt_cell(r, 'ember')} | {fmt_cell(r, 'numpy')} | "
                   f"{fmt_cell(r, 'torch')} | {fmt_ratio(r['ratio_numpy'])} | "
                   f"{fmt_ratio(r['ratio_torch'])} | {target} | {met} |")
    return "\n".join(out)


# ----------------------------------------------------------------- environment

def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def blas_info():
    """NumPy's BLAS library and its thread count (via threadpoolctl when present)."""
    try:
        from threadpoolctl import threadpool_info
        for info in threadpool_info():
            if info.get("user_api") == "blas":
                return f"{info.get('internal_api')} {info.get('version')}, {info.get('num_threads')} threads"
    except Exception:
        pass
    return "unknown"


def environment():
    import ember
    env = {
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "python": platform.python_version(),
        "nproc": os.cpu_count(),
        "cpu": cpu_model(),
        "ember": getattr(ember, "__version__", "?"),
        "ember_threads": ember.get_num_threads() if hasattr(ember, "get_num_threads") else "?",
        "numpy": np.__version__,
        "numpy_blas": blas_info(),
        "torch": torch.__version__ if torch is not None else "not installed",
        "torch_threads": torch.get_num_threads() if torch is not None else "n/a",
        "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?",
    }
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        env["git"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True, cwd=here, timeout=10).stdout.strip() or "?"
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "ember"], capture_output=True,
                               text=True, cwd=os.path.dirname(here), timeout=10).stdout.strip()
        if dirty:
            env["git"] += " (plus uncommitted changes under ember/)"
    except Exception:
        env["git"] = "?"
    return env


def environment_markdown(env):
    return (f"- date: {env['date']}; ember commit {env['git']}\n"
            f"- machine: {env['nproc']} CPUs (nproc), {env['cpu']}; Python {env['python']}; "
            f"load average at start {env['loadavg']} (the machine is shared)\n"
            f"- ember {env['ember']} ({env['ember_threads']} OpenMP threads); "
            f"NumPy {env['numpy']} (BLAS: {env['numpy_blas']}); "
            f"PyTorch {env['torch']} ({env['torch_threads']} threads, `torch.set_num_threads(2)`)")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------- suites

def run_suite(cases, quick_cases, quick):
    """Rows of every case (a callable returning rows), or of the tiny `quick_cases`."""
    rows = []
    for f in (quick_cases if quick else cases):
        if not quick:
            log(f"{getattr(f, '__name__', 'case')}:")
        rows += f()
    return rows


def main(run):
    """Command-line entry of a benchmark file: print the environment and its table."""
    quick = "--quick" in sys.argv
    print(environment_markdown(environment()))
    print()
    print(markdown_table(run(quick=quick)))
