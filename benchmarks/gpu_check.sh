#!/usr/bin/env bash
# The prepared GPU check: everything one short GPU window should tell us, in one command.
#
#   bash benchmarks/gpu_check.sh            # on a machine with an NVIDIA GPU
#
# Run it first whenever a GPU is available, whatever the work at hand; it is sized
# to finish in about 6 minutes on an H100 from a bare machine, so that a second run
# after a fix fits in the same 15-minute window.  Stages, each under its own time
# limit (a stage that fails or runs out of time is reported, and the next one runs):
#   1. build and install ember with the machine's Python (--no-build-isolation; pure-
#      Python build wheels missing there, meson-python and pyproject-metadata, are
#      installed from .whl/ when the caller carries that folder);
#   2. every GPU test suite (tests/cuda/test_cuda_*.py), spread over the CPU cores;
#   3. benchmarks/bench_gpu.py, every row, ember next to PyTorch in the same run;
#   4. the per-op profile of one ResNet-50 and one GPT-2 autocast step, ember's
#      (benchmarks/profile_gpu.py) and PyTorch's (torch.profiler), ranked by GPU time.
# Everything lands in $OUT (a temporary folder when unset): the summary as
# <date>-<gpu>.md (commit it as benchmarks/results/<date>-<gpu>.md and copy the
# bench table into benchmarks/README.md), and one log per stage.
#
# Without a GPU it says so and exits 0 (CI runs it that way).
set -uo pipefail
cd "$(dirname "$0")/.."

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check: no NVIDIA GPU on this machine (nvidia-smi finds none); nothing to check."
    exit 0
fi

OUT=${OUT:-$(mktemp -d)}
PY=${PYTHON:-python3}
NCPU=$(nproc)
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
GPU_TAG=$(echo "$GPU" | grep -oiE 'h100|h200|a100|l40s|b200|gh200' | head -1 | tr 'A-Z' 'a-z')
GPU_TAG=${GPU_TAG:-gpu}
SUMMARY="$OUT/$(date -u +%F)-$GPU_TAG.md"
START=$(date +%s)
export PYTHONUNBUFFERED=1

{
    echo "# GPU check, $(date -u '+%F %H:%M') UTC"
    echo
    echo "- GPU: $GPU ($(nvidia-smi --query-gpu=driver_version,memory.total --format=csv,noheader | head -1))"
    echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' + local changes')"
    echo "- Python: $($PY --version 2>&1); CPU cores: $NCPU"
    echo "- command: \`bash benchmarks/gpu_check.sh\`"
    echo
} >"$SUMMARY"

# stage NAME LIMIT_S LOG CMD...: runs CMD under a time limit, records status and time
stage() {
    local name=$1 limit=$2 log=$3
    shift 3
    local t0=$(date +%s)
    echo "gpu_check: $name (limit ${limit}s, $(( t0 - START ))s in)"
    timeout "$limit" "$@" >>"$log" 2>&1
    local rc=$?
    local took=$(( $(date +%s) - t0 ))
    local what="ok"
    [ $rc -ne 0 ] && what="FAILED (exit $rc)"
    [ $rc -eq 124 ] && what="OUT OF TIME"
    echo "- $name: $what in ${took}s (log: $(basename "$log"))" >>"$SUMMARY"
    echo "gpu_check: $name: $what in ${took}s"
    return $rc
}

# 1. build
if compgen -G ".whl/*.whl" >/dev/null; then
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/gpu-check-site .whl/*.whl \
        >"$OUT/build.log" 2>&1 && export PYTHONPATH=/tmp/gpu-check-site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! stage "build (pip install --no-build-isolation .)" 240 "$OUT/build.log" \
        $PY -m pip install -q --no-build-isolation --no-deps . ; then
    echo >>"$SUMMARY"
    echo "Build failed: the last lines of build.log:" >>"$SUMMARY"
    tail -30 "$OUT/build.log" | sed 's/^/    /' >>"$SUMMARY"
    cat "$SUMMARY"
    exit 1
fi
# import from the installed build, not the source folder
cd /tmp || exit 1
$PY -c "import ember, ember.cuda as c; print('ember', ember.__version__, 'cuda available:', c.is_available())" \
    >>"$OUT/build.log" 2>&1
# cuDNN: which library convolutions and batch norm will use (ember's own kernels without it)
$PY -c "import ember; from ember.cuda import _cudnn_lib as L; print('- cuDNN:', ember.backends.cudnn.version() or 'unavailable (' + str(L.unavailable_reason()) + '): ember kernels run')" \
    >>"$SUMMARY" 2>&1
cd - >/dev/null || exit 1

# 2. the GPU suites, spread over the cores (pytest-xdist when the machine has it)
XDIST=()
$PY -c "import xdist" 2>/dev/null && XDIST=(-n "$(( NCPU < 8 ? NCPU : 8 ))")
stage "GPU test suites" 150 "$OUT/tests.log" \
    $PY -P -m pytest -q -p no:cacheprovider "${XDIST[@]}" tests/cuda/test_cuda_*.py
echo "  - $(grep -E '^[0-9]+ (passed|failed)|(passed|failed).* in [0-9.]+s' "$OUT/tests.log" | tail -1)" >>"$SUMMARY"

# 3. every bench_gpu row, ember next to PyTorch
stage "bench_gpu.py (every row)" 170 "$OUT/bench.log" $PY benchmarks/bench_gpu.py

# 4. per-op profiles, ember's and PyTorch's, of one autocast step of each network
for net in resnet50 gpt; do
    for lib in ember torch; do
        echo "## profile: $net autocast float16, $lib" >>"$OUT/profiles.log"
        stage "profile $net --amp ($lib)" 40 "$OUT/profiles.log" \
            $PY benchmarks/profile_gpu.py "$net" --amp --steps 2 --lib "$lib"
        echo >>"$OUT/profiles.log"
    done
done

{
    echo
    echo "Total: $(( $(date +%s) - START ))s."
    echo
    echo "## bench_gpu.py"
    echo
    sed -n '/^| /,$p' "$OUT/bench.log" | grep -E '^\||^- ' || tail -20 "$OUT/bench.log"
    echo
    echo "## Per-op profiles (autocast float16; ember: profile_gpu.py, PyTorch: torch.profiler)"
    echo
    echo '```'
    cat "$OUT/profiles.log"
    echo '```'
    echo
    echo "## Failing GPU tests"
    echo
    echo '```'
    grep -E '^(FAILED|ERROR) ' "$OUT/tests.log" | head -60
    echo '```'
} >>"$SUMMARY"
echo "gpu_check: summary in $SUMMARY"
head -20 "$SUMMARY"
exit 0
