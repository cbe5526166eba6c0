"""Expected failures for the client runs (scikit-learn's and SciPy's tests on ember).

``EMBER_CLIENT_XFAILS`` names a file with one test id per line (as pytest prints it,
relative to the package folder; a prefix covers every parametrisation) followed by
`` # reason``; each matching test is marked xfail with that reason.  An id that matches
nothing is reported, so the list cannot go stale unnoticed.
"""
import os
import warnings

import pytest


def read(path):
    """[(id, reason)] from an xfails file; blank and comment lines are skipped."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            test_id, _, reason = line.partition(" #")
            out.append((test_id.strip(), reason.strip() or "expected failure"))
    return out


def pytest_collection_modifyitems(config, items):
    path = os.environ.get("EMBER_CLIENT_XFAILS")
    if not path:
        return
    entries = read(path)
    used = set()
    for item in items:
        for test_id, reason in entries:
            if item.nodeid == test_id or item.nodeid.startswith(test_id + "[") or \
                    item.nodeid.startswith(test_id + "::"):
                item.add_marker(pytest.mark.xfail(reason=reason, strict=False))
                used.add(test_id)
                break
    unused = [t for t, _ in entries if t not in used]
    if unused:
        warnings.warn(f"{len(unused)} ids in {path} match no collected test: {unused}")
