"""Every example runs (with few steps) so none can rot."""
import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")


def run_example(name, *args, needs=("sklearn",), cwd=None):
    for module in needs:
        pytest.importorskip(module)
    # run from a folder outside the checkout (by default) so `import ember` finds the
    # installed package, not the unbuilt sources
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args],
                          capture_output=True, text=True, timeout=300,
                          cwd=cwd or os.path.dirname(ROOT), env=dict(os.environ))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def load_example(name):
    """The example script as a module (its classes, to rebuild a model from a checkpoint)."""
    spec = importlib.util.spec_from_file_location(f"example_{name[:-3]}",
                                                  os.path.join(EXAMPLES, name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def test_digits_trains_checkpoints_resumes_and_plots(tmp_path):
    import ember
    needs = ("sklearn", "tqdm", "matplotlib")
    # an interrupted run: 1 of 2 epochs, then --resume finishes it from the checkpoint
    out = run_example("digits.py", "--epochs", "2", "--stop-after", "1", "--out",
                      str(tmp_path), needs=needs, cwd=tmp_path)
    assert "stopped: test accuracy" in out and "after 1 of 2 epochs" in out, out
    out = run_example("digits.py", "--resume", "--out", str(tmp_path), needs=needs,
                      cwd=tmp_path)
    assert "resumed from" in out and "after 2 of 2 epochs" in out, out
    acc = float(out.split("final test accuracy")[1].split("%")[0])
    assert acc > 85.0, out                  # 2 epochs already reach ~97%
    assert (tmp_path / "digits_curves.png").stat().st_size > 1000
    ckpt = ember.load(tmp_path / "digits.safetensors")
    assert ckpt["epoch"] == 2 and len(ckpt["history"]["test_acc"]) == 2
    model = load_example("digits.py").make_model()
    model.load_state_dict(ckpt["model"])    # strict: every parameter and buffer matches


def test_char_transformer_trains_and_samples(tmp_path):
    import ember
    out = run_example("char_transformer.py", "--steps", "5", "--eval-every", "5",
                      "--batch-size", "8", "--sample-length", "40", "--out", str(tmp_path),
                      needs=(), cwd=tmp_path)
    first, last = out.split("val loss ")[-1].split(" in ")[0].split(" -> ")
    assert float(last) < float(first), out  # 5 steps already beat the random init
    sample = out.split("--- sample")[1].split("\n", 1)[1]
    assert sample.startswith("Shall I ") and len(sample.rstrip("\n")) >= 40, out
    ckpt = ember.load(tmp_path / "char_transformer.safetensors")
    config = {k: int(v) for k, v in ckpt["config"].items()}
    model = load_example("char_transformer.py").CharTransformer(**config)
    model.load_state_dict(ckpt["model"])
    assert len(ckpt["vocab"]) == config["vocab_size"]


def test_char_transformer_trains_in_mixed_precision(tmp_path):
    out = run_example("char_transformer.py", "--steps", "5", "--eval-every", "5", "--amp",
                      "--batch-size", "8", "--sample-length", "10", "--out", str(tmp_path),
                      needs=(), cwd=tmp_path)
    assert "device cpu, mixed precision" in out and "bfloat16" in out, out
    first, last = out.split("val loss ")[-1].split(" in ")[0].split(" -> ")
    assert float(last) < float(first), out


def test_char_transformer_refuses_a_missing_gpu(tmp_path):
    import ember
    if ember.cuda.is_available():
        pytest.skip("a GPU is present")
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, "char_transformer.py"),
                           "--device", "cuda", "--steps", "1"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and "no usable CUDA device" in proc.stderr, proc.stderr


def test_custom_function_checks_and_trains(tmp_path):
    import ember
    out = run_example("custom_function.py", "--steps", "5", "--out", str(tmp_path),
                      needs=(), cwd=tmp_path)
    assert out.count("gradcheck and gradgradcheck pass") == 2, out
    assert "SiLUBackward" in out and "reloaded: same predictions" in out, out
    ckpt = ember.load(tmp_path / "custom_function_mlp.safetensors")
    load_example("custom_function.py").MLP().load_state_dict(ckpt["model"])
