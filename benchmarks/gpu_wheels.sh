#!/usr/bin/env bash
# Fetch the pure-Python build wheels that the GPU machine's image lacks into .whl/
# (git-ignored through .git/info/exclude), for benchmarks/gpu_check.sh to install there.
#   bash benchmarks/gpu_wheels.sh      # here, with network access to PyPI
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >>.git/info/exclude
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp -d .whl meson-python pyproject-metadata
ls .whl
