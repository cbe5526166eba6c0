"""``python -m tests.fuzz --calls 30000 --seed 0`` (from the repository root): a fuzz
campaign over every public callable of ember; prints the figures and a one-line
reproducer for every crash, hang, out-of-bounds write and silent success (a call NumPy
refuses that ember answered); exits 1 if there was any."""
import argparse
import json
import sys

from tests.fuzz import runner


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    ap.add_argument("--calls", type=int, default=30000, help="number of calls (30000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="first call number (to resume)")
    ap.add_argument("--batch", type=int, default=1000, help="calls per child process")
    ap.add_argument("--jobs", type=int, default=1, help="child processes at once")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per call before a hang")
    ap.add_argument("--mem-gb", type=float, default=1.0,
                    help="address-space limit per child: huge allocations fail fast (1)")
    ap.add_argument("--only", action="append", help="only this callable (repeatable), "
                                                    "e.g. ember.put or ndarray.sort")
    ap.add_argument("--no-confirm", action="store_true",
                    help="do not rerun each problem alone")
    ap.add_argument("--json", help="also write the report as JSON to this file")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    rep = runner.campaign(seed=a.seed, calls=a.calls, start=a.start, batch=a.batch,
                          jobs=a.jobs, timeout=a.timeout, mem_bytes=int(a.mem_gb * (1 << 30)),
                          only=a.only, confirm=not a.no_confirm,
                          log=None if a.quiet else (lambda m: print(m, file=sys.stderr,
                                                                    flush=True)))
    print(runner.format_report(rep))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rep, f, indent=1)
    return 1 if rep["problems"] or rep["lenient_calls"] else 0


if __name__ == "__main__":
    sys.exit(main())
