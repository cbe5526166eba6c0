#!/usr/bin/env bash
# The Array API conformance suite (the Consortium's array-api-tests, a read-only copy in
# ../shared/array-api-tests beside the repository) run against ember, twice:
#   float64  with EMBER_DEFAULT_DTYPE=float64 (Python floats are float64, as in NumPy)
#   float32  as shipped (float32 default)
# each with its expected failures in tests/array_api/xfails-<run>.txt, one test id per
# line followed by " # reason".  Any other failure fails the run.
#
#   tests/array_api/run.sh                  # both runs (CI)
#   tests/array_api/run.sh float64 -x       # one run; extra arguments go to pytest
#
# Measured 2026-11-27 on the 2-core dev machine under heavy load (load average 20-50):
# float64 run 92 s, float32 run 99 s (57 s of CPU for both).
# Settings: ARRAY_API_MAX_EXAMPLES (20), ARRAY_API_WORKERS (2, pytest-xdist),
# ARRAY_API_TESTS_DIR (../shared/array-api-tests).  Examples are derandomized so CI
# sees the same inputs every run.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
suite="$(cd "${ARRAY_API_TESTS_DIR:-$repo/../shared/array-api-tests}" && pwd)" || {
  echo "array-api-tests not found (set ARRAY_API_TESTS_DIR)" >&2; exit 2; }
examples="${ARRAY_API_MAX_EXAMPLES:-20}"
workers="${ARRAY_API_WORKERS:-2}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

runs=(float64 float32)
if [[ $# -gt 0 && ( $1 == float64 || $1 == float32 ) ]]; then runs=("$1"); shift; fi

# The suite imports the module named here; the default dtype comes from
# EMBER_DEFAULT_DTYPE (set_default_dtype as well, for builds that do not read it).
module='exec('"'"'import os, ember; d = os.environ.get("EMBER_DEFAULT_DTYPE"); d and ember.set_default_dtype(d); xp = ember'"'"')'

status=0
for run in "${runs[@]}"; do
  # the suite's --xfails-file wants bare ids: drop the reasons
  sed -e 's/[[:space:]]#.*$//' -e 's/[[:space:]]*$//' -e '/^#/d' -e '/^$/d' \
    "$here/xfails-$run.txt" > "$work/xfails-$run.txt"
  xdist=()
  [[ $workers -gt 0 ]] && xdist=(-n "$workers")
  echo "== array-api-tests, ember with the $run default dtype"
  start=$SECONDS
  # run from a scratch folder: the suite's folder may be read-only (hypothesis' database,
  # bytecode)
  ( cd "$work" && EMBER_DEFAULT_DTYPE=$run ARRAY_API_TESTS_MODULE="$module" \
      HYPOTHESIS_STORAGE_DIRECTORY="$work/hypothesis" PYTHONDONTWRITEBYTECODE=1 \
      python -m pytest "$suite/array_api_tests" --rootdir "$suite" -c "$suite/pytest.ini" \
        -p no:cacheprovider -q -rfE --max-examples "$examples" --disable-deadline \
        --derandomize "${xdist[@]}" --xfails-file "$work/xfails-$run.txt" "$@" ) || status=1
  echo "== $run run: $((SECONDS - start)) s"
done
exit $status
