"""Runs fuzz calls in a child process: ``python child.py CALLS.json FIRST PROTOCOL_FD``.

Before each call it writes ``S i`` to the protocol descriptor and after it
``E i outcome`` (``ok``, ``exc:TypeName`` or ``oob:what``), so the parent knows
which call was running when the process died (a crash) or stopped answering (a
hang).  The call's own prints go to /dev/null.
"""
import faulthandler
import json
import os
import sys
import warnings

# the repository root, so that the call sources can import tests.fuzz.values
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main():
    calls_path, first, fd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    proto = os.fdopen(fd, "w", buffering=1)
    faulthandler.enable(sys.stderr)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(os.devnull, "w")
    warnings.simplefilter("ignore")
    from tests.fuzz import values
    ns0 = {name: getattr(values, name) for name in values.__all__}
    with open(calls_path) as f:
        calls = json.load(f)
    proto.write("R\n")                 # ready: imports done
    for i, _target, source in calls[first:]:
        proto.write(f"S {i}\n")
        ns = dict(ns0)
        try:
            code = compile(source, f"<fuzz call {i}>", "exec")
            exec(code, ns)             # noqa: S102 -- our own generated source
            values.touch(ns.get("R"))
            outcome = "ok"
        except BaseException as exc:   # noqa: BLE001 -- an exception is a fine answer
            if isinstance(exc, KeyboardInterrupt):
                raise
            outcome = "exc:" + type(exc).__name__
        ns = None
        oob = values.check_guards()
        if oob:
            outcome = "oob:" + oob
        values.reset()
        proto.write(f"E {i} {outcome}\n")
    proto.write("D\n")


if __name__ == "__main__":
    main()
