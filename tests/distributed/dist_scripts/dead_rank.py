"""Run under mpiexec -n 2: rank 1 dies (kill), leaves early (exit), hangs, or raises; rank 0
must not hang: the job ends non-zero within the timeout with a clear message."""
import os, signal, sys, time
import ember, ember.distributed as dist
dist.init_process_group("mpi", timeout=float(sys.argv[2]))
r = dist.get_rank()
x = ember.ones(4)
dist.all_reduce(x)
mode = sys.argv[1]
if r == 1:
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "exit":
        sys.exit(0)
    elif mode == "hang":
        time.sleep(600)
    elif mode == "raise":
        raise ValueError("rank 1 broke")
dist.all_reduce(x)
print("survived", r, flush=True)
