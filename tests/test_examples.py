"""Every example runs (with few steps) so none can rot."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_example(name, *args):
    pytest.importorskip("sklearn")
    env = dict(os.environ)
    # run from a neutral folder so `import ember` finds the installed package
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", name), *args],
                          capture_output=True, text=True, timeout=300, cwd=os.path.dirname(ROOT),
                          env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_demo_trains_and_reports_accuracy():
    out = run_example("demo.py", "--epochs", "3", "--mlp-epochs", "3")
    lines = [l for l in out.splitlines() if l.startswith("ember")]
    assert lines, out
    acc = float(lines[0].split("test accuracy")[1].split("%")[0])
    assert acc > 85.0, out                  # 3 epochs of softmax regression on digits
    mlp = [l for l in out.splitlines() if l.startswith("autograd")]
    assert mlp, out
    acc = float(mlp[0].split("test accuracy")[1].split("%")[0])
    assert acc > 85.0, out                  # 3 epochs of the small network, autograd gradients
