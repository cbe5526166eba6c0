"""Runs fuzz calls in batches, each batch in a child process (tests/fuzz/child.py).

A child that dies while running a call is a crash (its signal or exit status is
recorded); one that does not finish a call within the timeout is a hang (it is
killed).  Either way a fresh child goes on with the next call.  A call that wrote
outside the arrays it was given is an out-of-bounds write.  Every crash, hang and
out-of-bounds write is then run again alone in a fresh child to confirm it, and
reported with a one-line reproducer.
"""
import collections
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time

from tests.fuzz import generate

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child.py")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BAD = ("crash", "hang", "oob")


def reproducer(source):
    return f'python -c "from tests.fuzz.values import *; {source}"'


def _limits(mem_bytes):
    def apply():
        import resource
        if mem_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def _describe_exit(rc):
    if rc is not None and rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


def run_batch(calls, timeout=10.0, mem_bytes=1 << 30, startup_timeout=300.0):
    """Run `calls` ([(i, target, source)]) in child processes.  Returns
    {i: outcome} and {i: detail} for the crashes and hangs."""
    outcomes, details = {}, {}
    index_of = {c[0]: k for k, c in enumerate(calls)}
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1", PYTHONFAULTHANDLER="1")
    with tempfile.TemporaryDirectory(prefix="ember-fuzz-") as tmp:
        path = os.path.join(tmp, "calls.json")
        with open(path, "w") as f:
            json.dump(calls, f)
        pos = 0
        while pos < len(calls):
            rfd, wfd = os.pipe()
            err = open(os.path.join(tmp, f"stderr{pos}"), "w+")
            proc = subprocess.Popen([sys.executable, CHILD, path, str(pos), str(wfd)],
                                    pass_fds=(wfd,), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=ROOT,
                                    preexec_fn=_limits(mem_bytes))
            os.close(wfd)
            current, started, buf, finished = None, False, b"", False
            try:
                while True:
                    wait = timeout if started else startup_timeout
                    ready, _, _ = select.select([rfd], [], [], wait)
                    if not ready:               # no answer in time
                        proc.kill()
                        proc.wait()
                        if current is None:
                            raise RuntimeError("fuzz child did not start in time")
                        outcomes[current] = "hang"
                        details[current] = f"no answer in {timeout:g} s (killed)"
                        pos = index_of[current] + 1
                        break
                    data = os.read(rfd, 1 << 16)
                    if not data:                # the child is gone
                        rc = proc.wait()
                        if finished:
                            pos = len(calls)
                        elif current is None:
                            err.seek(0)
                            raise RuntimeError(f"fuzz child died outside a call "
                                               f"({_describe_exit(rc)}): {err.read()[-2000:]}")
                        else:
                            err.seek(0)
                            tail = [ln for ln in err.read().splitlines() if ln.strip()]
                            outcomes[current] = "crash"
                            details[current] = (_describe_exit(rc) + ": "
                                                + " | ".join(tail[:2] + tail[-3:])[:600])
                            pos = index_of[current] + 1
                        break
                    buf += data
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        parts = line.decode().split(" ", 2)
                        if parts[0] == "R":
                            started = True
                        elif parts[0] == "S":
                            current = int(parts[1])
                        elif parts[0] == "E":
                            outcomes[int(parts[1])] = parts[2]
                            current = None
                        elif parts[0] == "D":
                            finished = True
            finally:
                os.close(rfd)
                err.close()
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    return outcomes, details


def _kind(outcome):
    return outcome.split(":", 1)[0]


def campaign(seed=0, calls=30000, start=0, batch=1000, jobs=1, timeout=10.0,
             mem_bytes=1 << 30, only=None, confirm=True, log=None):
    """Run `calls` fuzz calls; returns a report dict (see summarize)."""
    t0 = time.perf_counter()
    all_calls = generate.make_calls(seed, start, calls, only)
    batches = [all_calls[k:k + batch] for k in range(0, len(all_calls), batch)]
    outcomes, details, lock = {}, {}, threading.Lock()
    todo = list(range(len(batches)))

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                b = todo.pop(0)
            o, d = run_batch(batches[b], timeout, mem_bytes)
            with lock:
                outcomes.update(o)
                details.update(d)
                if log:
                    bad = sum(_kind(v) in BAD for v in o.values())
                    log(f"batch {b + 1}/{len(batches)}: {len(o)} calls, {bad} crashes/hangs/oob"
                        f" ({time.perf_counter() - t0:.0f} s)")
    threads = [threading.Thread(target=worker) for _ in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    by_index = {c[0]: c for c in all_calls}
    problems = []
    for i in sorted(outcomes):
        if _kind(outcomes[i]) in BAD:
            _, target, source = by_index[i]
            entry = {"index": i, "target": target, "outcome": outcomes[i],
                     "detail": details.get(i, outcomes[i]), "reproducer": reproducer(source)}
            if confirm:     # alone, in a fresh process
                o, _ = run_batch([by_index[i]], timeout, mem_bytes)
                entry["confirmed_alone"] = _kind(o.get(i, "?")) == _kind(outcomes[i])
            problems.append(entry)
    rep = summarize(seed, start, all_calls, outcomes, problems, time.perf_counter() - t0)
    rep["lenient_examples"] = {}
    rep["lenient_calls"] = []
    for i in sorted(outcomes):
        if _kind(outcomes[i]) == "lenient":
            _, target, source = by_index[i]
            rep["lenient_examples"].setdefault(target, f"{outcomes[i]}: {reproducer(source)}")
            rep["lenient_calls"].append({"index": i, "target": target,
                                         "numpy_raised": outcomes[i].split(":", 1)[1],
                                         "reproducer": reproducer(source)})
    return rep


def summarize(seed, start, all_calls, outcomes, problems, seconds):
    per = collections.defaultdict(collections.Counter)
    for i, target, _ in all_calls:
        per[target][_kind(outcomes.get(i, "missing"))] += 1
    totals = collections.Counter()
    for c in per.values():
        totals.update(c)
    return {"seed": seed, "start": start, "calls": len(all_calls), "seconds": round(seconds, 1),
            "totals": dict(totals), "targets_called": len(per),
            "per_target_bad": {t: dict(c) for t, c in sorted(per.items())
                               if any(c[k] for k in BAD)},
            "lenient_by_target": {t: c["lenient"] for t, c in sorted(per.items(),
                                                                      key=lambda kv: -kv[1]["lenient"])
                                  if c["lenient"]},
            "problems": problems}


def format_report(rep):
    t = rep["totals"]
    lines = [f"ember fuzz: seed {rep['seed']}, calls {rep['start']}..{rep['start'] + rep['calls'] - 1}"
             f" ({rep['calls']} calls on {rep['targets_called']} callables, {rep['seconds']} s)",
             f"  ok {t.get('ok', 0)}, exceptions {t.get('exc', 0)}, crashes {t.get('crash', 0)}, "
             f"hangs {t.get('hang', 0)}, out-of-bounds writes {t.get('oob', 0)}"
             + (f", missing {t['missing']}" if t.get("missing") else ""),
             f"  silent successes (NumPy refused the call, ember answered): {t.get('lenient', 0)}"]
    if rep.get("lenient_by_target"):
        lines.append("    " + ", ".join(f"{k} {v}" for k, v in rep["lenient_by_target"].items()))
    if rep["per_target_bad"]:
        lines.append("  by function (crash/hang/oob of calls):")
        for target, c in rep["per_target_bad"].items():
            n = sum(c.values())
            lines.append(f"    {target}: {c.get('crash', 0)}/{c.get('hang', 0)}/{c.get('oob', 0)}"
                         f" of {n}")
    for p in rep["problems"]:
        conf = p.get("confirmed_alone")
        lines.append(f"  [{p['outcome'].split(':')[0]}] call {p['index']} {p['target']}: "
                     f"{p['detail'][:300]}"
                     + ("" if conf is None else " (reproduced alone)" if conf
                        else " (NOT reproduced alone)"))
        lines.append(f"      {p['reproducer']}")
    for c in rep.get("lenient_calls", [])[:50]:
        lines.append(f"  [silent] call {c['index']} {c['target']}: NumPy {c['numpy_raised'][:150]}")
        lines.append(f"      {c['reproducer']}")
    return "\n".join(lines)
