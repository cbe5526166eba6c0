"""One call of each float32 math function of bench_math.py on one thread, for counting
instructions per element under callgrind (timings on the shared host are noisy):

    OMP_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file=cg.out \\
        --toggle-collect='em_v*' --toggle-collect='em_*_f32*' \\
        python benchmarks/callgrind_math.py 100000
    callgrind_annotate --inclusive=yes cg.out | grep -E 'em_v(exp|log|tanh)_f32|_f32'

Divide each kernel's inclusive count by n.  valgrind (3.19 here) has no AVX-512: under it
the CPU reports AVX2 and the AVX2 + FMA variants run (em_vmath.h, the x86-64-v3 clones of
embedding.pyx's kernels).
"""
import sys

import numpy as np

import ember
import ember.nn.functional as EF
from ember._kernels.cpu import embedding as K

ember.set_num_threads(1)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
rng = np.random.default_rng(0)
x = (rng.standard_normal(n) * 3).astype(np.float32)
ex, exp_ = ember.asarray(x), ember.asarray(np.abs(x) + np.float32(0.1))
out = np.empty_like(x)
ember.exp(ex)
ember.log(exp_)
ember.tanh(ex)
EF.tanh(ex)
EF.sigmoid(ex)
K.erf(x, out)
EF.gelu(ex)
EF.gelu(ex, approximate="tanh")
EF.softplus(ex)
