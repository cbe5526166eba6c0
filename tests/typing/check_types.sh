#!/usr/bin/env bash
# Type checks of ember's stubs (CI runs this after the test suite):
#
#   1. the installed ember ships py.typed and, beside every compiled module, the same
#      .pyi as the source tree (skipped for an editable install, which has no copy);
#   2. mypy.stubtest: every compiled (Cython) module of ember, and every module that has
#      a .pyi, against the built extension.  A .pyx without a .pyi fails here ("failed to
#      find stubs"), as does any difference not listed, with a reason, in
#      tests/typing/stubtest_allowlist.txt;
#   3. mypy over examples/*.py with the [tool.mypy] settings of pyproject.toml.
#
#   tests/typing/check_types.sh            # all three; exit status 1 if any fails
#
# Needs mypy (the `test` extra) and a built ember (`pip install .` or the editable
# install).  Measured 2026-11-27 on the 2-core dev machine: see the report printed at
# the end (each step's wall time).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
py="${PYTHON:-python}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
status=0
t_all=$SECONDS

# The modules to check: every .pyx under ember/ (compiled; its stub must exist) and every
# .pyi (the generated loop modules have no .pyx; a .pyi left behind by a moved module
# fails to import).  The AVX2 loop modules exist only where meson built them.
mapfile -t modules < <(cd "$repo" && "$py" - <<'EOF'
import pathlib
names = set()
for pattern in ("*.pyx", "*.pyi"):
    for p in pathlib.Path("ember").rglob(pattern):
        parts = list(p.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.add(".".join(parts))
print("\n".join(sorted(names)))
EOF
)

# Run from an empty directory, so that `import ember` is the built one, not the sources.
cd "$work"
if ! avx2="$("$py" -c 'import ember._build_config as c; print(c.AVX2_LOOPS_BUILT)')"; then
  echo "check_types: cannot import ember (build and install it first)" >&2
  exit 1
fi
checked=()
for m in "${modules[@]}"; do
  if [[ $m == *_v3 && $avx2 != True ]]; then
    echo "check_types: skipping $m (this build has no AVX2 loop modules)"
    continue
  fi
  checked+=("$m")
done

echo "== 1. installed stubs"
t0=$SECONDS
REPO="$repo" "$py" - "${checked[@]}" <<'EOF' || status=1
import filecmp, os, sys
import ember
repo = os.environ["REPO"]
pkg = os.path.dirname(os.path.abspath(ember.__file__))
if os.path.samefile(pkg, os.path.join(repo, "ember")):
    print("editable install (ember imports from the source tree): nothing to compare")
    sys.exit(0)
problems = []
if not os.path.exists(os.path.join(pkg, "py.typed")):
    problems.append("py.typed is not installed")
for mod in sys.argv[1:]:
    rel = mod.split(".")[1:]
    for stub in (os.path.join(*rel) + ".pyi", os.path.join(*rel, "__init__.pyi")):
        src = os.path.join(repo, "ember", stub)
        if os.path.exists(src):
            inst = os.path.join(pkg, stub)
            if not os.path.exists(inst):
                problems.append(f"{mod}: ember/{stub} is not installed")
            elif not filecmp.cmp(src, inst, shallow=False):
                problems.append(f"{mod}: the installed ember/{stub} differs from the source tree")
for p in problems:
    print("error:", p)
print(f"{len(sys.argv) - 1} modules: " + ("stubs installed" if not problems else
                                         f"{len(problems)} problem(s)"))
sys.exit(1 if problems else 0)
EOF
t1=$((SECONDS - t0))

echo "== 2. stubtest (${#checked[@]} modules)"
t0=$SECONDS
# The stubs come from the source tree (MYPYPATH); step 1 checked that the installed copies
# are the same files.  ember's Python layer (which the stubs import through its packages)
# is not annotated: errors there are silenced, but not in the modules checked here.
{ printf '[mypy]\n[mypy-ember.*]\nignore_errors = True\n'
  for m in "${checked[@]}"; do printf '[mypy-%s]\nignore_errors = False\n' "$m"; done
} > "$work/stubtest.ini"
if ! MYPYPATH="$repo" "$py" -m mypy.stubtest --mypy-config-file "$work/stubtest.ini" \
    --allowlist "$here/stubtest_allowlist.txt" "${checked[@]}"; then
  status=1
  echo "check_types: stubtest found differences between ember's .pyi stubs and the built"
  echo "  modules (above: 'error: NAME ...' with the stub's and the runtime's signatures)."
  echo "  Fix the .pyi next to the .pyx; allowlist only what stubtest cannot express."
fi
t2=$((SECONDS - t0))

echo "== 3. mypy examples/*.py"
t0=$SECONDS
(cd "$repo" && "$py" -m mypy --config-file pyproject.toml --cache-dir "$work/cache-examples" \
  examples/*.py) || status=1
t3=$((SECONDS - t0))

echo "check_types: installed stubs ${t1}s, stubtest ${t2}s, examples ${t3}s," \
     "total $((SECONDS - t_all))s: $([[ $status == 0 ]] && echo passed || echo FAILED)"
exit $status
