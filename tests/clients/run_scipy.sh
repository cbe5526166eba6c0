#!/usr/bin/env bash
# A fast selection of SciPy's own array-API tests with ember as the backend (the plugin
# tests/clients/scipy_ember.py; SCIPY_ARRAY_API=1, ember's default dtype float64 since
# SciPy builds float64 references): the test modules of the installed wheel listed in
# tests/clients/scipy-files.txt, only their tests parametrised over backends
# (-m array_api_backends).  Expected failures: tests/clients/scipy-xfails.txt.
#   tests/clients/run_scipy.sh [extra pytest arguments]
# Measured 2026-11-27: 2656 passed, 523 skipped, 4 xfail/xpass; 145 s wall under load average
# ~40 on 2 cores (37 s of CPU).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
site="$(python -c 'import os, scipy; print(os.path.dirname(scipy.__file__))')"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
files=()
while read -r f; do f="${f%% #*}"; [[ -n $f && $f != \#* ]] && files+=("$site/$f"); done < "$here/scipy-files.txt"
start=$SECONDS
( cd "$work" && SCIPY_ARRAY_API=1 EMBER_DEFAULT_DTYPE=float64 \
    EMBER_CLIENT_XFAILS="$here/scipy-xfails.txt" PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" \
    PYTHONDONTWRITEBYTECODE=1 python -m pytest -c "$here/clients.ini" --rootdir "$site" \
    -p scipy_ember -p client_xfails -m array_api_backends -q -rfE -n "${CLIENT_WORKERS:-2}" \
    "${files[@]}" "$@" )
status=$?
echo "== SciPy array-API tests on ember: $((SECONDS - start)) s"
exit $status
