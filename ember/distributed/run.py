"""Launch a training script on N processes: ``python -m ember.distributed.run --nproc N
script.py [args...]`` (or ``-m module``).

It runs ``mpiexec -n N <this python> script.py args...`` with the ``mpiexec`` of the MPI
library that mpi4py uses (the ``ember[mpi]`` extra installs MPICH's next to Python;
``--mpiexec PATH`` or ``$EMBER_MPIEXEC`` picks another), so it is the same as starting
the job with ``mpiexec`` by hand.  Each process calls
``ember.distributed.init_process_group("mpi")`` and gets its rank from MPI.  The
exit status is mpiexec's: non-zero when any rank fails.  ``OMP_NUM_THREADS`` is set to
``cores // N`` (at least 1) unless already set, so the ranks do not oversubscribe the
machine.
"""
import argparse
import os
import shutil
import subprocess
import sys


def find_mpiexec(explicit=None):
    """The mpiexec to use: `explicit`, ``$EMBER_MPIEXEC``, the one next to this Python
    (a virtual environment with the ``mpich`` wheel), or the first on ``PATH``."""
    for cand in (explicit, os.environ.get("EMBER_MPIEXEC")):
        if cand:
            return cand
    for d in (os.path.dirname(sys.executable), os.path.join(sys.prefix, "bin")):
        for name in ("mpiexec", "mpirun"):
            p = os.path.join(d, name)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
    for name in ("mpiexec", "mpirun"):
        p = shutil.which(name)
        if p:
            return p
    raise RuntimeError("ember.distributed.run: no mpiexec found; install an MPI with "
                       "`pip install ember[mpi]` (mpi4py + mpich) or pass --mpiexec PATH")


def build_command(nproc, target, args, module=False, mpiexec=None, mpiexec_args=()):
    cmd = [find_mpiexec(mpiexec), "-n", str(nproc), *mpiexec_args, sys.executable]
    cmd += (["-m", target] if module else [target]) + list(args)
    return cmd


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m ember.distributed.run",
        description="Run a training script on N processes with MPI (mpiexec -n N python ...).")
    p.add_argument("--nproc", "--nproc-per-node", "--nproc_per_node", type=int, default=None,
                   dest="nproc", help="number of processes (default: $WORLD_SIZE or 1)")
    p.add_argument("-m", "--module", action="store_true",
                   help="run the target as a module (python -m target)")
    p.add_argument("--mpiexec", default=None, help="the mpiexec executable to use")
    p.add_argument("--mpiexec-arg", action="append", default=[], dest="mpiexec_args",
                   help="an extra argument for mpiexec (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    p.add_argument("target", help="the script (or module with -m)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    ns = p.parse_args(argv)
    n = ns.nproc if ns.nproc is not None else int(os.environ.get("WORLD_SIZE", "1"))
    if n < 1:
        p.error(f"--nproc must be at least 1, got {n}")
    cmd = build_command(n, ns.target, ns.args, ns.module, ns.mpiexec, ns.mpiexec_args)
    if ns.dry_run:
        print(" ".join(cmd))
        return 0
    env = dict(os.environ)
    if "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // n))
    env.pop("WORLD_SIZE", None)     # MPI decides; a stale value would contradict it
    env.pop("RANK", None)
    try:
        return subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
