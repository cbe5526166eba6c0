"""ember's CPU caching allocator: an allocate-use-free loop with the cache on vs off.

Two loops, each iteration allocating a fresh array, touching all of it, and
dropping it (the storage dies at once, by reference counting):

* ``y = ember.empty(n); y.fill(1.0); del y``
* ``x + x`` with the result dropped

for arrays of 4 KB, 1 MB and 40 MB of float32.  ember is timed with
``ember.set_allocator_caching(False)`` (every freed block goes back to
``free()``) and ``True`` (freed blocks are kept by size class and handed out
again, still mapped and warm), interleaved in the same run (switching the
cache off empties it, so before each cache-on batch one block of the size is
allocated, touched and freed, untimed: the state of a loop already running); NumPy and PyTorch
run the same loops for context.  ``ember.memory_stats()`` is read before and
after each setting's batches to show where the requests were served from.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import interleaved, torch, log, fmt_time  # noqa: E402

import ember  # noqa: E402

SIZES = ((1024, "4 KB"), (262_144, "1 MB"), (10_000_000, "40 MB"))
LOOPS = {
    "empty + fill": {
        "ember": "y = ember.empty(n, dtype=ember.float32)\ny.fill(1.0)\ndel y",
        "numpy": "y = np.empty(n, dtype=np.float32)\ny.fill(1.0)\ndel y",
        "torch": "y = torch.empty(n, dtype=torch.float32)\ny.fill_(1.0)\ndel y",
    },
    "x + x": {"ember": "x + x", "numpy": "x + x", "torch": "x + x"},
}
STAT_KEYS = ("num_alloc_requests", "num_cache_hits", "num_os_allocs")


def _iterations(nbytes):
    """Loop iterations per timed batch: about the same total time per size."""
    if nbytes <= 64 * 1024:
        return 2000
    if nbytes <= 4 * 1024 * 1024:
        return 200
    return 8


def bench_allocator(sizes=SIZES, repeat=15, number=None):
    """Rows: one per (loop, size), ember with the cache off and on, NumPy, PyTorch."""
    was_caching = ember.memory_stats()["caching_enabled"]
    rows = []
    try:
        for loop, stmts in LOOPS.items():
            for n, size_label in sizes:
                rows.append(_one(loop, stmts, n, size_label, repeat, number))
    finally:
        ember.set_allocator_caching(was_caching)
    return rows


def _one(loop, stmts, n, size_label, repeat, number):
    case = f"`{loop}`, {size_label} float32 ({n} elements)"
    log(f"  {case}")
    number = number or _iterations(4 * n)
    x_np = np.ones(n, dtype=np.float32)
    ns_em = {"n": n, "x": ember.ones(n, dtype=ember.float32), "ember": ember}
    impls = {
        "ember_off": (stmts["ember"], ns_em),
        "ember_on": (stmts["ember"], ns_em),
        "numpy": (stmts["numpy"], {"n": n, "x": x_np, "np": np}),
        "torch": ((stmts["torch"], {"n": n, "x": torch.ones(n, dtype=torch.float32),
                                    "torch": torch}) if torch is not None else None),
    }
    deltas = {"off": dict.fromkeys(STAT_KEYS, 0), "on": dict.fromkeys(STAT_KEYS, 0)}
    snap = {}

    def hooks_for(mode):
        def before():
            ember.set_allocator_caching(mode == "on")
            if mode == "on":
                # Steady state of a running loop: switching the cache off for
                # the other batches emptied it, so put one warm block back.
                ember.empty(n, dtype=ember.float32).fill(0.0)
            snap[mode] = ember.memory_stats()

        def after():
            now = ember.memory_stats()
            for k in STAT_KEYS:
                deltas[mode][k] += now[k] - snap[mode][k]
            ember.set_allocator_caching(True)
        return before, after

    stats_before = ember.memory_stats()
    times, errors = interleaved(impls, number=number, repeat=repeat, warmup=2,
                                hooks={"ember_off": hooks_for("off"), "ember_on": hooks_for("on")})
    stats_after = ember.memory_stats()
    off, on = times.get("ember_off"), times.get("ember_on")
    return {
        "case": case,
        "loop": loop,
        "nbytes": 4 * n,
        "iterations_per_batch": number,
        "times": times,
        "errors": errors,
        "speedup": off / on if off and on else None,
        "stats_off": deltas["off"],
        "stats_on": deltas["on"],
        "memory_stats_before": stats_before,
        "memory_stats_after": stats_after,
    }


def _hits(d):
    req = d["num_alloc_requests"]
    return f"{d['num_cache_hits']}/{req} hits, {d['num_os_allocs']} OS allocs" if req else "n/a"


def markdown_table(rows):
    out = ["| loop (per iteration) | ember, cache off | ember, cache on | speedup (off/on) | "
           "ember/NumPy (cache on) | ember/PyTorch (cache on) | NumPy | PyTorch | "
           "memory_stats, cache off | memory_stats, cache on |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = r["times"]

        def cell(k):
            if t.get(k) is None:
                e = r["errors"].get(k, "")
                return f"n/a (error: {e})" if e and e != "not installed" else "n/a"
            return fmt_time(t[k])

        def ratio(k):
            return f"{t['ember_on'] / t[k]:.2f}x" if t.get("ember_on") and t.get(k) else "n/a"
        sp = f"{r['speedup']:.2f}x" if r["speedup"] else "n/a"
        out.append(f"| {r['case']} | {cell('ember_off')} | {cell('ember_on')} | {sp} | "
                   f"{ratio('numpy')} | {ratio('torch')} | {cell('numpy')} | {cell('torch')} | "
                   f"{_hits(r['stats_off'])} | {_hits(r['stats_on'])} |")
    return "\n".join(out)


def run(quick=False):
    if quick:
        return bench_allocator(sizes=((16, "64 B"), (1024, "4 KB")), repeat=2, number=5)
    log("bench_allocator:")
    return bench_allocator()


if __name__ == "__main__":
    rows = run(quick="--quick" in sys.argv)
    print(harness.environment_markdown(harness.environment()))
    print()
    print(markdown_table(rows))
