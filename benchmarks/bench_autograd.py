"""The autograd table: ember vs PyTorch (CPU), recording and backward.

Run directly (``python benchmarks/bench_autograd.py``) to print the table, or
through ``benchmarks/run_all.py`` which also rewrites benchmarks/README.md.
NumPy has no autograd, so its column reads ``n/a``; the targets are against
PyTorch.  Every ``bench_*`` function takes its sizes and repetition counts as
arguments (the smoke test runs them tiny) and returns a list of rows made by
``harness.make_row``.

Each case is a statement timed with ``harness.interleaved`` (same run,
rotating order, medians, batches for short calls).  Statements that call
``backward()`` reset the leaves' ``.grad`` to ``None`` first, in both
libraries, so every call builds a fresh graph and fresh gradients (nothing
accumulates from one call to the next).  Once per case, untimed, each library
runs the case's check statement on fresh leaves holding the same values, and
ember's outputs and gradients are compared with PyTorch's (``allclose``); a
mismatch is shown in ember's cell and the target is then not counted as met.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import interleaved, make_row, torch, log, to_numpy, _short_error  # noqa: E402

import ember  # noqa: E402

LIBS = ("ember", "torch")


# ------------------------------------------------------------------ plumbing

def _leaves(values, grad):
    """Namespaces per library: ``values`` maps a name to a float32 NumPy array,
    ``grad`` is the set of names that require grad.  Each library gets its own
    copy of the same values (ember's in memory ember allocated)."""
    def make():
        ns = {"ember": {"ember": ember}, "torch": {"torch": torch} if torch is not None else None}
        for name, v in values.items():
            ns["ember"][name] = ember.array(v.copy(), requires_grad=name in grad)
            if torch is not None:
                ns["torch"][name] = torch.from_numpy(v.copy()).requires_grad_(name in grad)
        return ns
    return make


def _run_check(check, outputs, fresh):
    """Run ``check[lib]`` once per library on fresh leaves; compare ember's
    ``outputs`` (expressions: results and ``x.grad``) with PyTorch's.
    Returns {lib: message} for a failure or a mismatch."""
    problems, got = {}, {}
    ns = fresh()
    for lib in LIBS:
        if ns.get(lib) is None:
            continue
        try:
            env = dict(ns[lib])
            exec(check[lib], env)
            vals = [eval(e, env) for e in outputs]
            got[lib] = [None if v is None else to_numpy(v) for v in vals]
        except Exception as exc:
            problems[lib] = _short_error(exc)
    if "ember" in got and "torch" in got:
        for expr, e, t in zip(outputs, got["ember"], got["torch"]):
            if e is None or t is None:
                if (e is None) != (t is None):
                    problems["ember"] = f"`{expr}` is None in one library only"
                    break
                continue
            e64, t64 = e.astype(np.float64), t.astype(np.float64)
            scale = float(np.abs(t64).max(initial=0))
            if e.shape != t.shape or not np.allclose(e64, t64, rtol=1e-3, atol=1e-5 * scale):
                what = "gradient" if expr.endswith(".grad") else "result"
                problems["ember"] = f"{what} `{expr}` differs from PyTorch's"
                break
    return problems


def _case(case, stmts, fresh, check, outputs, number, repeat, warmup=3, **row_kw):
    """Time ``stmts[lib]`` for ember and PyTorch, interleaved; check once."""
    ns = fresh()
    impls = {"ember": (stmts["ember"], ns["ember"]),
             "numpy": None,                                   # no autograd: n/a
             "torch": (stmts["torch"], ns["torch"]) if ns["torch"] is not None else None}
    log(f"  {case}")
    times, errors = interleaved(impls, number=number, repeat=repeat, warmup=warmup)
    for lib, msg in _run_check(check, outputs, fresh).items():
        errors.setdefault(lib, msg)
    return make_row(case, times, errors, **row_kw)


def _rng_values(shape, names, seed, low=None, high=None):
    rng = np.random.default_rng(seed)
    out = {}
    for name in names:
        if low is None:
            out[name] = rng.standard_normal(shape, dtype=np.float32)
        else:
            out[name] = rng.uniform(low, high, shape).astype(np.float32)
    return out


# ------------------------------------------------------------------ case 1

def bench_record(n=100, number=10_000, repeat=31):
    """Recording one small op: ``a * b`` on ``n`` float32, ``a`` requires grad
    (the op runs and a graph node is recorded; no backward)."""
    fresh = _leaves(_rng_values((n,), "ab", seed=11), grad={"a"})
    same = {lib: "a * b" for lib in LIBS}
    check = {lib: "r = a * b\nr.sum().backward()" for lib in LIBS}
    return [_case(f"record `a * b`, {n} float32, `a` requires grad, per call", same, fresh,
                  check, ("r", "a.grad", "b.grad"), number, repeat,
                  warmup=number // 10 + 1, targets=(("torch", 0.3),))]


# ------------------------------------------------------------------ case 2

def bench_small_backward(n=100, number=1_000, repeat=31):
    """``(w * x).sum().backward()`` on ``n`` float32 end to end (``w`` requires
    grad; ``w.grad = None`` before each call in both libraries)."""
    fresh = _leaves(_rng_values((n,), "wx", seed=12), grad={"w"})
    stmt = "w.grad = None\n(w * x).sum().backward()"
    same = {lib: stmt for lib in LIBS}
    return [_case(f"`(w * x).sum().backward()`, {n} float32, per call", same, fresh,
                  same, ("w.grad", "x.grad"), number, repeat,
                  warmup=number // 10 + 1, targets=(("torch", 0.2),))]


# ------------------------------------------------------------------ case 3

def bench_chain(n=100, depth=100, number=20, repeat=21):
    """A chain of ``depth`` ``tanh`` and ``depth`` ``mul`` (``y = tanh(y);
    y = y * c``, alternating) on ``n`` float32, forward and backward.  ``c`` is
    an array of values in [0.9, 1.1] that does not require grad (so gradients
    neither vanish to denormals nor blow up over the chain)."""
    values = _rng_values((n,), "x", seed=13)
    values.update(_rng_values((n,), "c", seed=14, low=0.9, high=1.1))
    fresh = _leaves(values, grad={"x"})
    body = ("x.grad = None\n"
            "y = x\n"
            f"for _k in range({depth}):\n"
            "    y = {mod}.tanh(y)\n"
            "    y = y * c\n"
            "y.sum().backward()")
    stmts = {"ember": body.format(mod="ember"), "torch": body.format(mod="torch")}
    return [_case(f"chain of {depth} `tanh` + {depth} `mul`, {n} float32, forward + backward",
                  stmts, fresh, stmts, ("y", "x.grad"), number, repeat,
                  targets=(("torch", 0.15),))]


# ------------------------------------------------------------------ case 4

def bench_matmul_backward(n=1024, repeat=21):
    """``(a @ b).sum().backward()`` for (n, n) float32, both requiring grad:
    one forward GEMM and two backward GEMMs (GFLOP/s counts all three)."""
    fresh = _leaves(_rng_values((n, n), "ab", seed=15), grad={"a", "b"})
    stmt = "a.grad = None\nb.grad = None\n(a @ b).sum().backward()"
    same = {lib: stmt for lib in LIBS}
    return [_case(f"`(a @ b).sum().backward()`, {n}x{n} float32, both require grad", same,
                  fresh, same, ("a.grad", "b.grad"), 1, repeat,
                  targets=(("torch", 1.0),), work=3 * 2 * n ** 3, unit="GFLOP/s")]


def run(quick=False):
    """All autograd rows; ``quick`` uses tiny sizes (for the smoke test)."""
    return harness.run_suite(
        (bench_record, bench_small_backward, bench_chain, bench_matmul_backward),
        (lambda: bench_record(n=100, number=10, repeat=2),
         lambda: bench_small_backward(n=100, number=10, repeat=2),
         lambda: bench_chain(n=100, depth=5, number=2, repeat=2),
         lambda: bench_matmul_backward(n=8, repeat=2)), quick)


if __name__ == "__main__":
    harness.main(run)
