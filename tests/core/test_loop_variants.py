"""The AVX2 build of the generated elementwise loops gives the baseline build's
results bit for bit (-ffp-contract=off: no fused multiply-adds), for every op of
the table on every dtype; the baseline runs in a subprocess with EMBER_NO_AVX2=1.
On a CPU without AVX2 + FMA both runs use the baseline and the test is skipped.
float32 exp, log and tanh are the exception by design: both builds call em_vmath.h's
kernels, which pick their own variant by CPU (so the bits agree here too), and
test_float32_math.py holds each variant to the ulp bounds instead of bit equality."""
import os
import subprocess
import sys

import numpy as np
import pytest

from ember._core import elementwise as _ew
from ember._kernels.cpu import optable

SCRIPT = r"""
import sys
import numpy as np
import ember
from ember._kernels.cpu import optable

def inputs(dtype):
    rng = np.random.default_rng(0)
    n = 1037                                 # odd: vector bodies and scalar tails both run
    if np.dtype(dtype).kind in "iub":
        a = rng.integers(-60, 60, n)
        b = rng.integers(1, 7, n)
    else:
        a = np.concatenate([rng.standard_normal(n - 9) * 4,
                            [0.0, -0.0, np.inf, -np.inf, np.nan, 88.5, -95.0, 1e-30, -1e-5]])
        b = rng.uniform(0.5, 3.0, n)
    return (ember.asarray(a).astype(dtype), ember.asarray(b).astype(dtype))

out = {}
with np.errstate(all="ignore"):
    for row in optable.OPS:
        name, arity = row.name, row.arity
        fn = getattr(ember, name)
        for dt in ["bool", "int8", "int32", "int64", "uint16", "float16", "bfloat16", "float32",
                   "float64", "complex64"]:
            a, b = inputs(getattr(ember, dt))
            try:
                r = fn(a, b) if arity == 2 else fn(a)
            except Exception:
                continue
            v = np.asarray(r)
            out[f"{name}:{dt}"] = v.view(np.uint8) if v.dtype.kind in "fcV" else v
        for src in ["float32", "float64", "float16", "bfloat16", "int32"]:
            a, _ = inputs(getattr(ember, src))
            for dst in ["float16", "bfloat16", "float32", "int8", "bool"]:
                v = np.asarray(a.astype(getattr(ember, dst)))
                out[f"cast:{src}:{dst}"] = v.view(np.uint8) if v.dtype.kind in "fcV" else v
    # every float16 bit pattern (NaN payloads, subnormals, both zeros): the AVX2 build
    # converts with F16C, the baseline with integer code
    bits = np.arange(65536, dtype=np.uint16)
    pat = ember.asarray(bits.view(np.float16))
    rev = ember.asarray(bits[::-1].copy().view(np.float16))
    for name in ("negative", "absolute", "positive", "sqrt", "exp", "tanh", "rint"):
        out[f"all16:{name}"] = np.asarray(getattr(ember, name)(pat)).view(np.uint16)
    for name in ("add", "multiply", "maximum", "fmin", "copysign", "divide"):
        fn = getattr(ember, name)
        out[f"all16:{name}"] = np.asarray(fn(pat, rev)).view(np.uint16)
        out[f"all16:{name}:scalar"] = np.asarray(fn(pat, pat[12345])).view(np.uint16)
        out[f"all16:{name}:strided"] = np.asarray(fn(pat[::3], rev[::3])).view(np.uint16)
np.savez(sys.argv[1], **out)
"""


@pytest.mark.skipif(_ew.LOOP_ISA != "avx2", reason="this CPU runs the baseline loops only")
def test_avx2_loops_equal_the_baseline_bit_for_bit(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    results = {}
    for isa, env in (("avx2", {}), ("baseline", {"EMBER_NO_AVX2": "1"})):
        path = tmp_path / f"{isa}.npz"
        subprocess.run([sys.executable, str(script), str(path)], check=True, timeout=300,
                       env={**os.environ, **env}, cwd=str(tmp_path))
        results[isa] = dict(np.load(path))
    assert results["avx2"].keys() == results["baseline"].keys()
    assert len(results["avx2"]) > 4 * len(optable.OPS)
    for key in results["avx2"]:
        np.testing.assert_array_equal(results["avx2"][key], results["baseline"][key],
                                      err_msg=key)


def test_the_variant_in_use_is_reported(tmp_path):
    assert _ew.LOOP_ISA in ("avx2", "baseline")
    # (run outside the source tree, so the installed ember is the one imported)
    res = subprocess.run([sys.executable, "-c", "from ember._core import elementwise as e; "
                          "print(e.LOOP_ISA)"], capture_output=True, text=True, check=True,
                         env={**os.environ, "EMBER_NO_AVX2": "1"}, cwd=str(tmp_path))
    assert res.stdout.strip() == "baseline"
