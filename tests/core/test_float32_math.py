"""ember's own float32 exp, expm1, log, log1p, tanh, sin and cos (branch-free, so the
generated loops vectorise; float16/bfloat16 use them too) against the float64
result: within a stated number of ulp over the whole float32 range, special
values (signed zeros, infinities, NaN, subnormal inputs and results) as NumPy
gives them, and within NumPy's own test tolerance of NumPy's float32 results."""
import numpy as np
import pytest

import ember

RNG = np.random.default_rng(11)
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e-40, -1e-40, 1.4e-45,
                    1.17549435e-38, 1.0, -1.0, 0.5, -0.5, 0.625, -0.625, 0.6249, 88.72, 88.7229,
                    -87.33, -103.28, -103.98, -150.0, 3e38, -3e38])
WIDE = np.concatenate([RNG.uniform(-100, 100, 400_000), RNG.standard_normal(400_000),
                       10.0 ** RNG.uniform(-45, 38, 400_000) * RNG.choice([-1, 1], 400_000),
                       SPECIAL])
POSITIVE = np.concatenate([10.0 ** RNG.uniform(-45, 38.5, 600_000), RNG.uniform(0, 4, 200_000),
                           SPECIAL])
NEAR_ZERO = RNG.uniform(-1, 1, 400_000)

# name, inputs, max ulp (NumPy's float32 versions measure 2.4 / 2.6 / 3.5 / 1.9 / 1.4 here)
CASES = [
    ("exp", WIDE, 1.0),
    ("expm1", np.concatenate([WIDE, NEAR_ZERO]), 2.0),
    ("log", np.concatenate([POSITIVE, WIDE]), 1.0),
    ("log1p", np.concatenate([WIDE, NEAR_ZERO, [-1.0, -1.0000001, -0.9999999]]), 2.5),
    ("tanh", np.concatenate([WIDE, NEAR_ZERO, RNG.uniform(-12, 12, 400_000)]), 1.5),
    # sin/cos: em_math.h below 256 in magnitude (3.4 ulp seen near multiples of pi at
    # 16-64), libm above; the sample covers both sides of the switch
    ("sin", np.concatenate([WIDE, RNG.uniform(-300, 300, 600_000), [256.0, -256.0, 256.00002]]), 3.5),
    ("cos", np.concatenate([WIDE, RNG.uniform(-300, 300, 600_000), [256.0, -256.0, 256.00002]]), 3.5),
]


def check(name, x, got, max_ulp):
    """got = ember's float32 `name` of x: NaN, infinities and signed zeros as NumPy's,
    within max_ulp of the float64 result, subnormal results within 2 steps."""
    with np.errstate(all="ignore"):
        ref = getattr(np, name)(x.astype(np.float64))
        ref32 = ref.astype(np.float32)
        numpy32 = getattr(np, name)(x)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref32))
    inf = np.isinf(ref32)
    np.testing.assert_array_equal(got[inf], ref32[inf])
    zero = x == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(numpy32[zero]))
    tiny = float(np.finfo(np.float32).tiny)
    normal = np.isfinite(ref32) & (np.abs(ref) >= tiny)
    ulp = np.spacing(np.abs(ref32[normal])).astype(np.float64)
    assert (np.abs(got[normal] - ref[normal]) / ulp).max() <= max_ulp
    sub = np.isfinite(ref) & (np.abs(ref) < tiny)    # subnormal results: rounded once
    steps = np.abs(got[sub] - ref[sub]) / float(np.finfo(np.float32).smallest_subnormal)
    assert sub.sum() == 0 or steps.max() <= 2.0


@pytest.mark.parametrize("name, inputs, max_ulp", CASES, ids=[c[0] for c in CASES])
def test_float32_math_accuracy(name, inputs, max_ulp):
    x = inputs.astype(np.float32)
    check(name, x, np.asarray(getattr(ember, name)(ember.asarray(x))), max_ulp)


# exp, log and tanh run em_vmath.h's kernels: an AVX-512 + FMA, an AVX2 + FMA and a
# baseline variant, picked by CPU at run time (EMBER_MATH_ISA caps the choice).  The
# variants may differ by an ulp (fused multiply-adds round once), so each is held to the
# bounds above on its own, contiguous and strided (a strided operand goes through a
# buffer), in a subprocess that caps the variant.
VARIANT_SCRIPT = r"""
import sys
import numpy as np
import ember
from ember._kernels.cpu import _loops_ops0 as loops
data = np.load(sys.argv[1])
out = {"isa": np.array(loops.math_isa())}
for name in ("exp", "log", "tanh"):
    x = data[name]
    out[name] = np.asarray(getattr(ember, name)(ember.asarray(x)))
    two = np.stack([x, x[::-1]], axis=1)           # column 0: a stride of 8 bytes
    out[name + ":strided"] = np.asarray(getattr(ember, name)(ember.asarray(two)[:, 0]))
np.savez(sys.argv[2], **out)
"""


@pytest.mark.parametrize("isa", ["avx512", "avx2", "baseline"])
def test_float32_math_variants(isa, tmp_path):
    import os
    import subprocess
    import sys
    from ember._kernels.cpu import _loops_ops0 as loops
    order = ["baseline", "avx2", "avx512"]
    if order.index(isa) > order.index(loops.math_isa()):
        pytest.skip(f"this CPU has no {isa} variant")
    cases = {c[0]: (c[1].astype(np.float32), c[2]) for c in CASES if c[0] in ("exp", "log", "tanh")}
    np.savez(tmp_path / "in.npz", **{k: v[0] for k, v in cases.items()})
    (tmp_path / "run.py").write_text(VARIANT_SCRIPT)
    subprocess.run([sys.executable, str(tmp_path / "run.py"), str(tmp_path / "in.npz"),
                    str(tmp_path / "out.npz")], check=True, timeout=300, cwd=str(tmp_path),
                   # baseline: the SSE2 loop modules too (in the AVX2 ones the baseline
                   # variant is compiled for AVX2)
                   env={**os.environ, "EMBER_MATH_ISA": isa,
                        **({"EMBER_NO_AVX2": "1"} if isa == "baseline" else {})})
    got = np.load(tmp_path / "out.npz")
    assert str(got["isa"]) == isa
    for name, (x, max_ulp) in cases.items():
        check(name, x, got[name], max_ulp)
        check(name, x, got[name + ":strided"], max_ulp)
