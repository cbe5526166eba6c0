#!/usr/bin/env bash
# Static checks over ember/ and tests/ (CI runs this after the test suite, .ci/run):
#   ruff with pyflakes' rules only (pyproject.toml [tool.ruff.lint]: undefined names,
#     unused imports and variables, redefinitions; no style rules);
#   vulture at 80% confidence (unused imports, variables and arguments, unreachable
#     code); names it cannot see used are listed, each with its reason, in
#     tools/vulture_whitelist.py.
# Neither reads Cython (.pyx/.pxd) or CUDA (.cu): those are checked by review.
# Both come with the test extra (pip install ".[test]").  A few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check --no-cache ember tests
vulture ember tests tools/vulture_whitelist.py --min-confidence 80
echo "lint: ruff (pyflakes rules) and vulture found nothing"
