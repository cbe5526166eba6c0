"""One training step of bench_train.py's network with an ember switch off vs on, PyTorch
alongside, interleaved in one process (medians), as benchmarks/ab_lenet.py does.

Switches: ``fastbwd`` (linear's and ReLU's kernel-direct backward, issue #25), ``od6``
(the convolution weight gradient's 6 x 4 tiles, ``conv._set_od_six``), ``batchdx``
(small input gradients with 16 samples per vector, ``conv._set_batch_input``), ``batchfwd``
(the same for small valid forwards, ``conv._set_batch_forward``), ``batchdw`` (and
their weight gradients, ``conv._set_batch_weight``), ``batchall`` (the three), ``fuse``
(``container.fuse_enabled``: Linear + ReLU), ``fuseconv`` (``container.fuse_conv_enabled``:
Conv2d + ReLU, with ``fuse_enabled`` on), ``adam`` (the float32 Adam loops' division-free
quotient, ``optim._set_adam_fast``), ``mlp3`` (``fuse`` and ``adam`` together), ``swap``
(``container.swap_relu_pool``), ``optpar`` (the optimizers' two-thread threshold at 16,384
elements, the default, against the earlier 262,144, ``optim._set_parallel_threshold``),
``ksplit`` (float32 GEMMs with a long K split over the threads by K ranges, and batched
products with one right operand run as one product, ``gemm._set_ksplit``),
``prefetch`` (the packed float32 GEMM's prefetch of the blocks it packs next,
``gemm._f32_tune`` modes 3 / 4), ``attn`` (the fused float32 attention kernel,
``attention._set_fused``), ``none``.  The network is
``mlp``, ``lenet5`` or ``transformer`` (bench_train.py's, batch 64).  By
default both libraries run on ONE thread and the time is CPU time (a loaded machine
disturbs it far less than wall time); ``--wall`` uses two threads and wall time.

    python benchmarks/ab_step.py mlp|lenet5|transformer [repetitions] [--wall] SWITCH
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


import ab_common  # noqa: E402
import ember  # noqa: E402
from ember._core import array as _array  # noqa: E402
from ember.nn.modules import container  # noqa: E402
import ember.nn.functional  # noqa: E402,F401  (the modules the switches reach)

_FAST_BWD_MODULES = ("ember.nn.functional.linear", "ember.nn.functional.activation")


def _switch(knob, on):
    if knob == "fuse":
        container.fuse_enabled = on
    elif knob == "fuseconv":
        container.fuse_conv_enabled = on
    elif knob in ("adam", "mlp3"):
        from ember._kernels.cpu import optim
        optim._set_adam_fast(on)
        if knob == "mlp3":
            container.fuse_enabled = on
    elif knob == "swap":
        container.swap_relu_pool = on
    elif knob == "optpar":
        from ember._kernels.cpu import optim
        optim._set_parallel_threshold(16384 if on else 262144)
    elif knob == "od6":         # 6 x 4 weight-gradient tiles (LeNet's conv1; branch convs2)
        from ember._kernels.cpu import conv as ck
        ck._set_od_six(int(on))
    elif knob == "batchdx":     # conv2's input gradient over batch lanes (branch lenet4)
        from ember._kernels.cpu import conv as ck
        ck._set_batch_input(on)
    elif knob == "batchfwd":    # conv2's forward over batch lanes (branch lenet4)
        from ember._kernels.cpu import conv as ck
        ck._set_batch_forward(on)
    elif knob == "batchdw":     # conv2's weight gradient over batch lanes (branch lenet4)
        from ember._kernels.cpu import conv as ck
        ck._set_batch_weight(on)
    elif knob == "batchall":    # the three (branch lenet4)
        from ember._kernels.cpu import conv as ck
        ck._set_batch_input(on)
        ck._set_batch_forward(on)
        ck._set_batch_weight(on)
    elif knob == "attn":        # fused float32 CPU attention (branch attn4)
        from ember._kernels.cpu import attention as fa
        fa._set_fused(on)
    elif knob == "fastbwd":     # the rules take their fast path only when grad mode is off
        for name in _FAST_BWD_MODULES:
            sys.modules[name]._grad_on = _array._is_grad_enabled if on else (lambda: True)
    elif knob == "ksplit":      # float32 GEMMs split over K / batch collapsed (branch ksplit)
        from ember._kernels.cpu import gemm
        gemm._set_ksplit(on)
    elif knob == "prefetch":    # the packed float32 GEMM's prefetch of its next blocks
        from ember._kernels.cpu import gemm
        gemm._f32_tune(0, 0, 0, 4 if on else 3)
    elif knob != "none":
        raise SystemExit(f"ab_step: unknown switch {knob!r}")


def main(argv):
    wall = "--wall" in argv
    args = [a for a in argv[1:] if not a.startswith("--")]
    net, knob = args[0], args[-1]
    reps = int(args[1]) if len(args) > 2 else 21
    ms = ab_common.step_ab(net, 64, lambda on: _switch(knob, on), reps, wall,
                           number=20 if net == "mlp" else 3, labels=("off", "on"),
                           restore=knob in ("fastbwd", "swap", "fuse", "adam", "mlp3", "optpar",
                                            "attn", "ksplit", "prefetch"))
    print(f"{net} {knob}: " + ab_common.describe(ms, wall, ("off", "on"), digits=4))

if __name__ == "__main__":
    main(sys.argv)
