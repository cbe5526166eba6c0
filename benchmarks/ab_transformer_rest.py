"""A/B of the Transformer step's non-GEMM changes of branch ``tfm3`` (issue #25): the
residual add fused into LayerNorm (``nn.modules.transformer.fuse_add_norm``) and the fused
AVX2 float32 layer-norm rows (``ember._kernels.cpu.norm._set_ln_avx2``), both off
("before") against both on ("after"), interleaved with PyTorch in one process.

    python benchmarks/ab_transformer_rest.py step [repetitions] [--wall]
    python benchmarks/ab_transformer_rest.py layers [repetitions]

``layers`` times LayerNorm alone on the step's (32, 64, 128) float32 activations, one
thread, CPU time: forward, backward (input, weight and bias gradients), and the residual
add + LayerNorm forward as two ops and as one.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ab_common  # noqa: E402
import harness  # noqa: E402, F401  (sets up the import path and PyTorch as the others do)
import ember  # noqa: E402


def _switch(on):
    from ember.nn.modules import transformer
    from ember._kernels.cpu import norm
    transformer.fuse_add_norm = bool(on)
    norm._set_ln_avx2(bool(on))


def layers(repeat):
    import numpy as np
    import ember.nn.functional as F
    from ember.nn.functional.normalization import add_layer_norm
    ember.set_num_threads(1)
    rng = np.random.default_rng(0)
    x = ember.asarray(rng.standard_normal((32, 64, 128), dtype=np.float32))
    r = ember.asarray(rng.standard_normal((32, 64, 128), dtype=np.float32))
    g = ember.asarray(rng.standard_normal((32, 64, 128), dtype=np.float32))
    w = ember.asarray(rng.standard_normal(128, dtype=np.float32), requires_grad=True)
    b = ember.asarray(rng.standard_normal(128, dtype=np.float32), requires_grad=True)
    xg = ember.asarray(x, requires_grad=True)

    def fwd():
        F.layer_norm(x, (128,), w.detach(), b.detach())

    def bwd():
        F.layer_norm(xg, (128,), w, b).backward(g)

    def two_ops():
        F.layer_norm(x + r, (128,), w.detach(), b.detach())

    def one_op():
        add_layer_norm(x, r, (128,), w.detach(), b.detach())

    for name, fn, fuse in (("LayerNorm forward", fwd, None), ("LayerNorm fwd + bwd", bwd, None),
                           ("add + LayerNorm forward", two_ops, one_op)):
        fns = {"before": lambda fn=fn: (_switch(False), fn()),
               "after": lambda fn=fn, fuse=fuse: (_switch(True), (fuse or fn)())}
        ms = ab_common.round_robin(fns, time.process_time, 20, repeat)
        print(f"{name}: before {1e3 * ms['before']:.1f} us, after {1e3 * ms['after']:.1f} us "
              f"({ms['after'] / ms['before']:.3f})")
    _switch(True)


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    mode = args[0] if args else "step"
    reps = int(args[1]) if len(args) > 1 else 15
    if mode == "layers":
        layers(reps)
        return
    wall = "--wall" in argv
    ms = ab_common.step_ab("transformer", 32, _switch, reps, wall)
    print(ab_common.describe(ms, wall))


if __name__ == "__main__":
    main(sys.argv)
