"""Smoke test of benchmarks/: every benchmark function runs once, tiny, and
returns well-formed rows (so the suite cannot rot).  No timing is asserted."""
import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "benchmarks")
sys.path.insert(0, BENCH)

import harness  # noqa: E402
import bench_core  # noqa: E402
import bench_autograd  # noqa: E402
import bench_allocator  # noqa: E402
import run_all  # noqa: E402

import ember  # noqa: E402

ROW_KEYS = {"case", "times", "errors", "ratio_numpy", "ratio_torch", "ratio_best", "target",
            "met", "rate", "rate_unit", "note"}


def _check_core_rows(rows, n):
    assert len(rows) == n
    for r in rows:
        assert set(r) >= ROW_KEYS
        assert set(r["times"]) == set(harness.LIBS)
        assert r["times"]["numpy"] > 0
        for lib in harness.LIBS:
            t = r["times"][lib]
            # either a positive time or a reason why not
            assert (t is not None and t > 0) or r["errors"].get(lib), (r["case"], lib)
        assert r["met"] in (True, False, None)
        if r["times"]["ember"] and r["times"]["numpy"]:
            assert r["ratio_numpy"] > 0
    md = harness.markdown_table(rows)
    assert md.count("\n") == len(rows) + 1


@pytest.mark.parametrize("fn, kwargs, n", [
    (bench_core.bench_small, dict(n=10, number=5, repeat=2), 2),
    (bench_core.bench_large_elementwise, dict(n=100, repeat=2), 4),
    (bench_core.bench_sum_2d, dict(shape=(8, 4), repeat=2), 3),
    (bench_core.bench_matmul, dict(n=4, repeat=2), 1),
])
def test_core_benchmarks_run(fn, kwargs, n):
    _check_core_rows(fn(**kwargs), n)


@pytest.mark.parametrize("fn, kwargs", [
    (bench_autograd.bench_record, dict(n=10, number=5, repeat=2)),
    (bench_autograd.bench_small_backward, dict(n=10, number=5, repeat=2)),
    (bench_autograd.bench_chain, dict(n=10, depth=3, number=2, repeat=2)),
    (bench_autograd.bench_matmul_backward, dict(n=4, repeat=2)),
])
def test_autograd_benchmarks_run(fn, kwargs):
    pytest.importorskip("torch")
    rows = fn(**kwargs)
    assert len(rows) == 1
    r = rows[0]
    assert set(r) >= ROW_KEYS
    assert set(r["times"]) == set(harness.LIBS)
    assert r["times"]["numpy"] is None                       # no autograd in NumPy: n/a
    # ember runs and its results and gradients agree with PyTorch's (no error noted)
    assert r["times"]["ember"] > 0 and "ember" not in r["errors"], (r["case"], r["errors"])
    assert r["times"]["torch"] > 0 and "torch" not in r["errors"], (r["case"], r["errors"])
    assert r["ratio_torch"] > 0 and r["met"] in (True, False)
    assert r["target"].endswith("x PyTorch")
    md = harness.markdown_table(rows)
    assert md.count("\n") == 2 and "| n/a |" in md


def test_autograd_check_flags_a_wrong_gradient():
    pytest.importorskip("torch")
    fresh = bench_autograd._leaves(bench_autograd._rng_values((5,), "ab", seed=0), grad={"a"})
    good = "r = a * b\nr.sum().backward()"
    assert bench_autograd._run_check({"ember": good, "torch": good}, ("r", "a.grad", "b.grad"),
                                     fresh) == {}
    bad = {"ember": "r = a * b\n(r * 2).sum().backward()", "torch": good}
    problems = bench_autograd._run_check(bad, ("r", "a.grad"), fresh)
    assert "gradient `a.grad` differs" in problems["ember"]
    row = harness.make_row("x", {"ember": 1.0, "numpy": None, "torch": 1.0},
                           {"numpy": "not installed", **problems}, targets=(("torch", 1.0),))
    assert row["met"] is None and "differs from PyTorch" in harness.markdown_table([row])


def test_allocator_benchmark_runs_and_restores_caching():
    before = ember.memory_stats()["caching_enabled"]
    rows = bench_allocator.bench_allocator(sizes=((16, "64 B"),), repeat=2, number=3)
    assert ember.memory_stats()["caching_enabled"] == before
    assert len(rows) == len(bench_allocator.LOOPS)
    for r in rows:
        assert {"case", "times", "errors", "speedup", "stats_off", "stats_on"} <= set(r)
        for k in ("ember_off", "ember_on", "numpy"):
            assert r["times"][k] > 0, (r["case"], k, r["errors"])
        assert r["speedup"] > 0
        assert r["stats_off"]["num_cache_hits"] == 0         # cache off: nothing reused
        assert r["stats_on"]["num_cache_hits"] > 0
    assert "cache on" in bench_allocator.markdown_table(rows)


def test_interleaved_reports_errors_instead_of_raising():
    impls = {"ember": ("undefined_name_xyz + 1", {}), "numpy": ("1 + 1", {}), "torch": None}
    times, errors = harness.interleaved(impls, number=3, repeat=2)
    assert times["ember"] is None and "NameError" in errors["ember"]
    assert times["numpy"] > 0
    assert times["torch"] is None and errors["torch"]
    row = harness.make_row("x", times, errors, targets=(("numpy", 1.0),))
    assert row["met"] is None
    assert "n/a (error: NameError" in harness.markdown_table([row])


def test_run_all_render_and_readme_markers(tmp_path):
    core = bench_core.bench_matmul(n=4, repeat=1)
    alloc = bench_allocator.bench_allocator(sizes=((16, "64 B"),), repeat=1, number=2)
    auto = bench_autograd.bench_record(n=10, number=2, repeat=1)
    text = run_all.render(harness.environment(), core, alloc, 0.0, autograd_rows=auto)
    assert "| case | ember | NumPy | PyTorch |" in text and run_all.COMMAND in text
    assert "### Autograd" in text and auto[0]["case"] in text
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{run_all.START}\nold\n{run_all.END}\nend\n")
    run_all.write_readme(text, path=str(readme))
    new = readme.read_text()
    assert "old" not in new and text in new and new.startswith("intro") and new.endswith("end\n")


@pytest.mark.parametrize("net", ["mlp", "lenet5", "resnet20", "transformer"])
def test_training_benchmarks_run_and_agree_with_pytorch(net):
    """Each training benchmark runs tiny, and ember's first losses from PyTorch's
    initial weights match PyTorch's (the same network, the same numerics)."""
    pytest.importorskip("torch")
    import bench_train
    rows = bench_train.bench_network(net, batch=2, number=1, repeat=1, check_steps=2)
    r = rows[0]
    assert r["times"]["ember"] > 0 and "ember" not in r["errors"], (r["case"], r["errors"])
    assert r["times"]["torch"] > 0 and r["met"] in (True, False)
    assert "| n/a |" in harness.markdown_table(rows)


def test_training_peak_memory_is_measured():
    pytest.importorskip("torch")
    import bench_train
    rss = {"mlp": bench_train.peak_rss("mlp", steps=1)}
    # growth over the post-import peak: may be 0 KiB for a tiny model, never missing
    assert rss["mlp"]["ember"] is not None and rss["mlp"]["ember"] >= 0
    assert rss["mlp"]["torch"] is not None and rss["mlp"]["torch"] >= 0
    assert "| MLP" in bench_train.markdown_rss(rss)


def test_bfloat16_benchmark_runs():
    import bench_bfloat16
    rows = bench_bfloat16.run(quick=True)
    assert [" ".join(r["case"].split(" ")[:2]) for r in rows] == [
        "add bfloat16", "exp bfloat16", "add float16", "exp float16", "sum bfloat16",
        "matmul bfloat16", "MLP 784-256-10"]
    for r in rows:
        assert set(r) >= ROW_KEYS
        assert r["times"]["ember"] and r["times"]["ember"] > 0, (r["case"], r["errors"])
    assert rows[-1]["errors"]["numpy"] == "no nn"


def test_math_benchmark_runs():
    import bench_math
    rows = bench_math.run(quick=True)
    assert [r["case"].split("`")[1] for r in rows] == list(bench_math.FUNCS)
    for r in rows:
        assert set(r) >= ROW_KEYS
        # NumPy has no sigmoid/gelu/softplus/erf: those rows compare with PyTorch alone
        assert r["times"]["ember"], (r["case"], r["errors"])
        assert r["times"]["numpy"] or r["times"].get("torch") or \
            r["errors"].get("numpy") == "no NumPy function", (r["case"], r["errors"])


def test_fft_benchmark_runs():
    import bench_fft
    rows = bench_fft.run(quick=True)
    assert len(rows) == 2 * len(bench_fft.QUICK)
    for r in rows:
        assert set(r) >= ROW_KEYS
        assert r["times"]["ember"] and r["times"]["numpy"], (r["case"], r["errors"])


def test_profile_resnet20_layers_runs(capsys):
    """benchmarks/profile_resnet20_layers.py at tiny sizes (no timing is asserted)."""
    pytest.importorskip("torch")
    import profile_resnet20_layers as prof
    rows = prof.layer_rows(batch=1, repeat=1, number=1)
    assert len(rows) == len(prof.RESNET20_CONVS)
    assert all(ms[k] > 0 for *_, ms in rows for k in ms)
    prof.print_layers(rows, batch=1)
    steps = prof.step_rows(nets=("mlp", "lenet5"), repeat=1, batch=2, number=1)
    assert [r[0] for r in steps] == ["mlp", "lenet5"]
    assert all(r[4] > 0 and r[5] > 0 for r in steps)        # the kernel timers saw work
    prof.print_steps(steps)
    assert "conv/GEMM" in capsys.readouterr().out
