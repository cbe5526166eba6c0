"""The optimizers' group steps, each defined once as an op (one call per parameter group).

``sgd_group``, ``adam_group``, ``rmsprop_group``, ``adagrad_group`` and
``init_state_adagrad`` are ops whose body is the fused CPU kernel of
``ember/_kernels/cpu/optim.pyx``.  When a parameter of the group lives on a GPU the
call goes, as every op's does, through the one GPU dispatch
(``ember/cuda/_dispatch.py``) to the implementation registered for the op: the
function of the same name in ``ember/optim/_gpu.py`` (same arguments), registered
below when the GPU backend starts.  The steps write into the parameters and their
state under no gradient tracking, so autograd never records them (``nondiff``).

>>> import ember
>>> from ember.optim import _steps
>>> from ember.optim.optimizer import ParamState
>>> w = ember.asarray([1.0, -1.0], requires_grad=True)
>>> w.grad = ember.asarray([0.5, 0.5])
>>> _steps.sgd_group([w], ParamState(), 0.5, 0.0, 0.0, 0.0, False, False)
>>> w.tolist()
[0.75, -1.25]
"""
from ember._core import gpu_hooks
from ember._kernels.cpu import optim as _cpu
from ember.autograd.dispatch import DiffOp

__all__ = ["sgd_group", "adam_group", "rmsprop_group", "adagrad_group",
           "init_state_adagrad"]


def _step_op(kernel):
    """The op ``ember.optim._steps.<kernel name>`` with the CPU kernel as its body."""
    return DiffOp(kernel, f"optim._steps.{kernel.__name__}", nondiff=True)


sgd_group = _step_op(_cpu.sgd_group)
adam_group = _step_op(_cpu.adam_group)
rmsprop_group = _step_op(_cpu.rmsprop_group)
adagrad_group = _step_op(_cpu.adagrad_group)
init_state_adagrad = _step_op(_cpu.init_state_adagrad)


def _register_gpu_steps(call):
    """Register ember/optim/_gpu.py's function of each op's name as its GPU
    implementation.  They take groups whose parameters live on several GPUs (model
    parallelism) and launch on each parameter's device: ``multi_device``."""
    from ember.cuda._dispatch import gpu_op
    from ember.optim import _gpu
    for op in (sgd_group, adam_group, rmsprop_group, adagrad_group, init_state_adagrad):
        impl = getattr(_gpu, op.fn.__name__)
        impl.multi_device = True
        gpu_op(op.name)(impl)


gpu_hooks.on_gpu_start(_register_gpu_steps)
