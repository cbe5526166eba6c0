#!/usr/bin/env bash
# Builds the documentation site into docs/_build/html, warnings as errors:
#   pip install ".[docs]" && bash docs/build.sh
# 1. the HTML pages, from scratch (sphinx-build -E -W --keep-going): a docstring that
#    does not render, a README section an include no longer finds, a public name on no
#    reference page, or a docstring example the reference shows that
#    tests/test_docstrings.py does not run, each fails the build;
# 2. the user guide's examples (``testcode`` blocks) under Sphinx's doctest builder.
# The docstrings' own >>> examples run in the test suite (tests/test_docstrings.py),
# once, not here a second time.
set -euo pipefail
cd "$(dirname "$0")"
out=_build
sphinx-build -E -W --keep-going -q -b html -d "$out/doctrees" . "$out/html"
sphinx-build -W --keep-going -q -b doctest -d "$out/doctrees" . "$out/doctest"
echo "docs: $(find "$out/html" -name '*.html' | wc -l) pages in docs/$out/html;" \
     "guide examples run: $(awk '/Doctest summary/ {f = 1} f && /tests$/ {print $1; exit}' "$out/doctest/output.txt")"
