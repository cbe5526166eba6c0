#!/usr/bin/env bash
# scikit-learn's own array-API tests with ember as the array namespace (the plugin
# tests/clients/sklearn_ember.py): every test that scikit-learn parametrises over
# namespaces, in the test modules of the installed wheel listed below, runs once on
# ember arrays.  Expected failures: tests/clients/sklearn-xfails.txt (id # reason).
#   tests/clients/run_sklearn.sh [extra pytest arguments]
# Measured 2026-11-27: 481 passed; 182 s wall under load average ~25 on 2 cores (28 s of CPU).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
site="$(python -c 'import os, sklearn; print(os.path.dirname(sklearn.__file__))')"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
files=()
while read -r f; do [[ -n $f && $f != \#* ]] && files+=("$site/$f"); done < "$here/sklearn-files.txt"
start=$SECONDS
( cd "$work" && SCIPY_ARRAY_API=1 EMBER_CLIENT_XFAILS="$here/sklearn-xfails.txt" PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" \
    PYTHONDONTWRITEBYTECODE=1 python -m pytest -c "$here/clients.ini" --rootdir "$site" \
    -p sklearn_ember -p client_xfails -q -rfE -n "${CLIENT_WORKERS:-2}" "${files[@]}" "$@" )
status=$?
echo "== scikit-learn array-API tests on ember: $((SECONDS - start)) s"
exit $status
