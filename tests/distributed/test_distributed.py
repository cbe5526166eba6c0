"""ember.distributed and DistributedDataParallel.

The multi-process tests start real MPI jobs (``mpiexec -n 2`` / ``-n 4``) running the
scripts in ``tests/distributed/dist_scripts/``; each rank checks its results against NumPy (or
against one process trained on the combined batch) and prints ``OK <rank>``.  The
single-process tests use the world-of-one group that needs no launcher.
"""
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.distributed as dist

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "dist_scripts"


def _mpiexec():
    pytest.importorskip("mpi4py")
    from ember.distributed.run import find_mpiexec
    try:
        return find_mpiexec()
    except RuntimeError as e:
        pytest.skip(str(e))


def _env():
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    for k in ("RANK", "WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "PMI_FD", "EMBER_DIST_TIMEOUT"):
        env.pop(k, None)
    return env


def _run(cmd, timeout, cwd, env=None):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=env or _env(), cwd=cwd, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"{' '.join(map(str, cmd))} hung for more than {timeout} s:\n{out}")
    return p, time.monotonic() - t0


def _mpirun(n, script, *args, timeout=240, cwd=None, okdir=None):
    # never run from the repository root: `python -m` would import the uncompiled source
    # tree instead of the installed ember (CI installs with `pip install .`)
    cmd = [_mpiexec(), "-n", str(n), sys.executable, str(SCRIPTS / script), *map(str, args)]
    env = _env()
    if okdir is not None:
        env["EMBER_TEST_OK_DIR"] = str(okdir)
    return _run(cmd, timeout, cwd or okdir, env)


def _assert_all_ok(p, n, okdir):
    """Exit status 0 and every rank wrote its OK file (the ranks' stdout may interleave)."""
    assert p.returncode == 0, p.stdout
    oks = sorted(f.name for f in Path(okdir).glob("ok.*"))
    assert oks == [f"ok.{k}" for k in range(n)], p.stdout


# ------------------------------------------------------------------ multi-process

@pytest.mark.parametrize("n", [2, 4])
def test_collectives_match_numpy_on_every_rank(n, tmp_path):
    p, _ = _mpirun(n, "collectives.py", n, okdir=tmp_path)
    _assert_all_ok(p, n, tmp_path)


@pytest.mark.parametrize("n", [2, 4])
def test_bfloat16_collectives_and_ddp(n, tmp_path):
    # MPI has no bfloat16: reductions in float32 rounded once, movement bit-exact, DDP
    p, _ = _mpirun(n, "bfloat16.py", okdir=tmp_path)
    _assert_all_ok(p, n, tmp_path)


def test_subgroups_on_four_ranks(tmp_path):
    # new_group: collectives within the group, global src/dst, non-members, DDP on a group
    p, _ = _mpirun(4, "groups.py", okdir=tmp_path)
    _assert_all_ok(p, 4, tmp_path)


def test_ddp_matches_one_process_on_the_combined_batch(tmp_path):
    p, _ = _mpirun(2, "ddp.py", okdir=tmp_path)
    _assert_all_ok(p, 2, tmp_path)


@pytest.mark.parametrize("mode", ["kill", "exit", "hang", "raise"])
def test_a_dead_rank_fails_the_job_instead_of_hanging(mode, tmp_path):
    p, secs = _mpirun(2, "dead_rank.py", mode, 3, timeout=90, cwd=tmp_path)
    assert p.returncode != 0, p.stdout
    assert "survived" not in p.stdout
    if mode in ("exit", "hang"):
        # the survivor's collective times out with a message naming it
        assert "all_reduce: timed out after 3 s" in p.stdout, p.stdout
        assert "DistBackendError" in p.stdout
    elif mode == "raise":
        assert "rank 1 broke" in p.stdout and "aborting the MPI job" in p.stdout, p.stdout
    else:
        assert "BAD TERMINATION" in p.stdout or "signal 9" in p.stdout, p.stdout
    assert secs < 60, secs


def test_launcher_runs_the_script_on_n_ranks(tmp_path):
    pytest.importorskip("mpi4py")
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, ember, ember.distributed as dist\n"
        "dist.init_process_group('mpi')\n"
        "x = ember.ones(3) * (dist.get_rank() + 1)\n"
        "dist.all_reduce(x)\n"
        "line = f'rank {dist.get_rank()} of {dist.get_world_size()} {x.tolist()} {sys.argv[1:]}'\n"
        "open(f'out.{dist.get_rank()}', 'w').write(line)\n"
        "dist.destroy_process_group()\n")
    cmd = [sys.executable, "-m", "ember.distributed.run", "--nproc", "2", str(script), "--lr", "1"]
    p, _ = _run(cmd, 120, tmp_path)
    assert p.returncode == 0, p.stdout
    lines = sorted(f.read_text() for f in tmp_path.glob("out.*"))
    assert lines == ["rank 0 of 2 [3.0, 3.0, 3.0] ['--lr', '1']",
                     "rank 1 of 2 [3.0, 3.0, 3.0] ['--lr', '1']"], p.stdout

    bad = tmp_path / "bad.py"
    bad.write_text("import ember.distributed as dist\ndist.init_process_group()\n"
                   "raise SystemExit(3 if dist.get_rank() == 1 else 0)\n")
    p, _ = _run([sys.executable, "-m", "ember.distributed.run", "--nproc", "2", str(bad)], 120,
                tmp_path)
    assert p.returncode != 0


def test_launcher_dry_run_shows_the_mpiexec_command(tmp_path):
    pytest.importorskip("mpi4py")
    p, _ = _run([sys.executable, "-m", "ember.distributed.run", "--nproc", "3", "--dry-run",
                 "t.py", "a"], 60, tmp_path)
    assert p.returncode == 0, p.stdout
    words = p.stdout.split()
    assert "mpiexec" in os.path.basename(words[0]) or "mpirun" in os.path.basename(words[0])
    assert words[1:3] == ["-n", "3"] and words[-2:] == ["t.py", "a"]


def test_ddp_digits_example_runs_on_two_ranks(tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("mpi4py")
    cmd = [sys.executable, "-m", "ember.distributed.run", "--nproc", "2",
           str(ROOT / "examples" / "ddp_digits.py"), "--epochs", "1", "--steps", "6"]
    p, _ = _run(cmd, 240, tmp_path)
    assert p.returncode == 0, p.stdout
    assert "rank 0" in p.stdout and "accuracy" in p.stdout, p.stdout


# ------------------------------------------------------------------ one process

@pytest.fixture
def world1():
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("mpi", timeout=10)
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


def test_world_of_one_without_a_launcher(world1, monkeypatch):
    assert (dist.get_rank(), dist.get_world_size(), dist.get_backend()) == (0, 1, "mpi")
    x = ember.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    for op in ("sum", "avg", "max", "min", "prod"):
        dist.all_reduce(x, op=op)
    np.testing.assert_array_equal(np.asarray(x), np.arange(6, dtype=np.float32).reshape(2, 3))
    out = [ember.zeros(3)]
    dist.all_gather(out, ember.ones(3))
    assert out[0].tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(RuntimeError, match="twice"):
        dist.init_process_group()


def test_init_errors(monkeypatch):
    if dist.is_initialized():
        dist.destroy_process_group()
    with pytest.raises(RuntimeError, match="not been initialized"):
        dist.get_rank()
    import ember.cuda
    if not ember.cuda.is_available():
        with pytest.raises(RuntimeError, match="nccl.*GPU arrays"):
            dist.init_process_group("nccl")
    with pytest.raises(ValueError, match="gloo"):
        dist.init_process_group("gloo")
    monkeypatch.setenv("WORLD_SIZE", "2")
    for v in ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS",
              "HYDI_CONTROL_FD", "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(v, raising=False)
    with pytest.raises(RuntimeError, match="mpiexec"):
        dist.init_process_group("mpi")
    assert not dist.is_initialized()


def test_lists_lying_back_to_back_are_used_without_a_copy(world1):
    from ember.distributed._c10d import _ListBuf
    big = ember.zeros((3, 4))
    rows = list(big)
    lb = _ListBuf(rows, (4,), np.dtype(np.float32), "all_gather", "tensor_list", True)
    assert lb._is_span() and lb.arr.ctypes.data == big.data_ptr()
    sep = [ember.zeros(4) for _ in range(3)]
    lb = _ListBuf(sep[::-1], (4,), np.dtype(np.float32), "all_gather", "tensor_list", True)
    assert lb.arr.shape == (3, 4)


def test_errors_name_the_op_and_shapes(world1):
    with pytest.raises(ValueError, match=r"all_gather: tensor_list\[0\] is a float32 array of "
                                         r"shape \(2,\).*shape \(3,\)"):
        dist.all_gather([ember.zeros(2)], ember.zeros(3))
    with pytest.raises(TypeError, match="all_reduce: ReduceOp.AVG is not supported for dtype int64"):
        dist.all_reduce(ember.zeros(2, dtype=ember.int64), op="avg")
    with pytest.raises(ValueError, match="read-only"):
        a = np.zeros(3)
        a.flags.writeable = False
        dist.all_reduce(a)
    with pytest.raises(TypeError, match="ember array"):
        dist.all_reduce([1.0, 2.0])
    with pytest.raises(ValueError, match="all_gather_into_tensor: output_tensor"):
        dist.all_gather_into_tensor(ember.zeros(3), ember.zeros(2))


def test_ddp_in_one_process_is_the_plain_module(world1):
    from ember import nn
    from ember.nn.parallel import DistributedDataParallel as DDP
    ember.random.seed(0)
    m = nn.Linear(3, 2)
    ddp = DDP(m)
    assert ddp.module is m
    x = ember.asarray(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
    ddp(x).sum().backward()
    g = np.asarray(m.weight.grad).copy()
    m.zero_grad()
    m(x).sum().backward()
    np.testing.assert_allclose(np.asarray(m.weight.grad), g)
    assert set(ddp.state_dict()) == {"module.weight", "module.bias"}
    with pytest.raises(ValueError, match="device_ids"):
        DDP(m, device_ids=[0])


def test_ddp_reducer_in_one_process(world1):
    from helpers import check_ddp_reducer_on
    check_ddp_reducer_on("cpu")


def test_ddp_device_arguments(world1):
    from ember import nn
    from ember.nn.parallel import DistributedDataParallel as DDP
    m = nn.Linear(3, 2)
    for kw in ({"device_ids": [0]}, {"output_device": 0}, {"device_ids": ["cuda:0"]}):
        with pytest.raises(ValueError, match="is for GPU models"):
            DDP(m, **kw)
    DDP(m, device_ids=None, output_device=None)
    DDP(m, device_ids=[])


@pytest.mark.parametrize("modname", ["ember.distributed", "ember.distributed._c10d"])
def test_docstring_examples_run_in_one_process(modname):
    # (tests/test_docstrings.py covers ember.nn.parallel and ember.data.distributed)
    import doctest
    import importlib
    if dist.is_initialized():
        dist.destroy_process_group()
    mod = importlib.import_module(modname)
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.attempted > 5 and res.failed == 0, res
    assert not dist.is_initialized()


def test_benchmark_runs(tmp_path):
    pytest.importorskip("mpi4py")
    pytest.importorskip("torch")            # bench_train's harness imports it
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_distributed.py"), "--sizes", "1",
           "--nets", "mlp", "--repeat", "2", "--steps", "1"]
    p, _ = _run(cmd, 240, tmp_path)
    assert p.returncode == 0, p.stdout
    assert "| 1 MB |" in p.stdout and "| mlp |" in p.stdout, p.stdout
