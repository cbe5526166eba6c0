"""Names vulture reports as unused (tools/lint.sh, --min-confidence 80) that are used.

vulture counts a name as used when it appears anywhere in the files it reads, so each
name below is listed once, with the reason it must stay.  A new entry needs a reason:
a finding without one is dead code to delete.  Not imported by anything.
"""
# ruff: noqa: F821   (the names are bare on purpose)

# -- keyword arguments that exist for NumPy's or PyTorch's signature and are ignored
subok                       # ember.*_like, ember.lib.stride_tricks (NumPy: subclasses)
memory_format               # ember._torch (PyTorch's Tensor methods)
check_available             # ember.accelerator.current_accelerator (torch.accelerator)
check_undefined_grad        # ember.autograd.gradcheck (torch.autograd.gradcheck)
fast_mode                   # ember.autograd.gradcheck
nondet_tol                  # ember.autograd.gradcheck
gen_non_contig_grad_outputs  # ember.autograd.gradgradcheck
group_name                  # ember.distributed.init_process_group / new_group
pg_options                  # ember.distributed.init_process_group / new_group
group_desc                  # ember.distributed.new_group
use_local_synchronization   # ember.distributed.new_group
check_reduction             # ember.nn.parallel.DistributedDataParallel
protocol                    # ember.nn.Parameter.__reduce_ex__ (pickle's signature)
include_numpy_namespaces    # tests/clients/sklearn_ember.py (scikit-learn's hook)
fraction                    # tests/cuda_emu/fakecupy.py: CuPy's signatures, emulated
return_scalar               # tests/cuda_emu/fakecupy.py
non_blocking                # tests/cuda_emu/fakecupy.py
disable_timing              # tests/cuda_emu/fakecupy.py
is_half_allowed             # tests/cuda_emu/fakecupy.py

# -- pytest fixtures a test requests by name for their effect, not their value
cuda_default                # tests/cuda/test_cuda_creation_glue.py: a GPU default device
no_leaks                    # tests/data/test_data.py: no worker processes or segments left
world1                      # tests/distributed/test_distributed.py: a one-rank process group
nccl_group                  # tests/distributed/test_distributed_nccl.py: an NCCL group
exact_sqrt                  # tests/optim/test_optim.py: a correctly rounded sqrt in torch
threaded                    # tests/optim/test_optim.py: small groups split over threads
