"""The fuzzer (tests/fuzz/): it detects crashes, hangs and writes outside arrays, and a
fixed-seed sample of calls over every public callable has none of them.

The long run is one command: ``python -m tests.fuzz --calls 30000 --seed 0``.
"""
import os
import sys

import pytest

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the fuzz runner uses POSIX pipes")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    # appended, not prepended: the root also holds the source folder ember/, which must
    # not shadow the installed ember here or in the processes this one spawns
    sys.path.append(ROOT)

from tests.fuzz import generate, runner, values  # noqa: E402


def test_the_runner_reports_a_crash_a_hang_and_an_out_of_bounds_write():
    calls = [
        (0, "t.ok", "R = ember.ones(3) + 1"),
        (1, "t.crash", "import ctypes; ctypes.string_at(0)"),
        (2, "t.exception", "R = ember.ones(3) + 'x'"),
        (3, "t.hang", "import time; time.sleep(60)"),
        (4, "t.oob", "a0 = A((3,), 'float32', 'step'); values = __import__('tests.fuzz.values',"
                     " fromlist=['x']); values._LIVE[-1][0][-1] = 7"),
        (5, "t.after", "R = ember.arange(4).sum()"),
    ]
    outcomes, details = runner.run_batch(calls, timeout=3.0)
    assert outcomes[0] == "ok" and outcomes[5] == "ok"
    assert outcomes[1] == "crash" and "SIGSEGV" in details[1]
    assert outcomes[2] == "exc:TypeError"
    assert outcomes[3] == "hang"
    assert outcomes[4].startswith("oob:")


def test_guards_see_writes_into_the_gaps_of_a_strided_view():
    x = values.A((2, 3), "float64", "step", "rand", 1)
    assert values.check_guards() is None
    x[...] = 5.0                                     # inside the view: fine
    assert values.check_guards() is None
    raw = values._LIVE[-1][0]
    raw[values.GUARD * 8 + 8] ^= 1                   # the gap between two elements
    assert "outside" in values.check_guards()
    values.reset()


def test_calls_are_reproducible_one_by_one():
    tg = generate.targets()
    assert generate.make_call(tg, 5, 1234) == generate.make_call(tg, 5, 1234)
    names = {t[0] for t in tg}
    assert {"ember.sum", "ember.linalg.solve", "ember.nn.functional.relu", "ember.add.reduce",
            "ndarray.sort"} <= names


def test_a_fixed_seed_sample_has_no_crash_hang_or_out_of_bounds_write():
    rep = runner.campaign(seed=0, calls=4000, batch=2000, jobs=2, timeout=20.0, confirm=False)
    assert rep["totals"].get("ok", 0) > 400            # the sample reaches real work
    assert not rep["problems"], runner.format_report(rep)
    # no silent successes: where NumPy refuses a call, ember refuses it too (ember's
    # deliberate extensions, each with its reason, are tests/fuzz/child.py's DELIBERATE)
    assert not rep["lenient_calls"], runner.format_report(rep)
