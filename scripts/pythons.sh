#!/usr/bin/env bash
# Every Python version samzapy claims, proven: for each version, a virtualenv of its own
# (.venv-<version>) made from the machine's interpreter, then the unit and contract suites
# (the versions side by side, on two CPUs or more) and the CLI quick start. `make test` runs
# the whole suite on its own virtualenv's Python and this script on the others.
#
#   scripts/pythons.sh [VERSION...]    (default: every version pyproject.toml's classifiers name)
#   scripts/pythons.sh --list          print the claimed versions
#
# An interpreter that is missing is an error, never a skip: install it (pyenv install 3.13) or
# set PYTHON_<major>_<minor>=/path/to/python (for example PYTHON_3_11=/usr/bin/python3.11).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

die() {
    echo "pythons.sh: $*" >&2
    exit 1
}

claimed() {
    sed -n 's/.*"Programming Language :: Python :: \(3\.[0-9]*\)".*/\1/p' pyproject.toml
}

# The interpreter of version $1: $PYTHON_3_x, python3.x on PATH, or pyenv's.
find_python() {
    local version="$1" var="PYTHON_${1/./_}" candidate
    for candidate in "${!var:-}" "python$version" "$HOME"/.pyenv/versions/"$version".*/bin/python3; do
        [[ -n "$candidate" ]] || continue
        command -v "$candidate" >/dev/null 2>&1 || continue
        if "$candidate" -c "import sys; sys.exit(f'{sys.version_info[0]}.{sys.version_info[1]}' != '$version')" 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

if [[ "${1:-}" == "--list" ]]; then
    claimed
    exit 0
fi
versions=("$@")
if [[ ${#versions[@]} -eq 0 ]]; then
    mapfile -t versions < <(claimed)
fi
[[ ${#versions[@]} -gt 0 ]] || die "no versions given and none found in pyproject.toml's classifiers"

# 1. Each version's virtualenv and install, one after the other (the builds share build/).
for version in "${versions[@]}"; do
    python="$(find_python "$version")" ||
        die "Python $version is claimed by pyproject.toml but no interpreter was found (tried \$PYTHON_${version/./_}, python$version, ~/.pyenv/versions/$version.*)"
    venv=".venv-$version"
    echo "== Python $version ($python) in $venv"
    if [[ ! -f "$venv/.installed" || pyproject.toml -nt "$venv/.installed" ]]; then
        rm -rf "$venv"
        "$python" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --upgrade pip
        "$venv/bin/python" -m pip install --quiet '.[test]'
        touch "$venv/.installed"
    fi
    # A plain (not editable) install of this checkout, as a user's `pip install .` makes it:
    # the quick start below runs the installed package.
    "$venv/bin/python" -m pip install --quiet --no-deps --force-reinstall .
    rm -rf build
    # The suites import samzapy from the checkout (python -m pytest puts it first on sys.path):
    # give it this version's C extension (KV's constructor, the framed records' paths) from the
    # install, so that the suites run with it here as in .venv; tests/unit/api/test_kv_speedups.py
    # and tests/unit/control/test_speedups.py test both paths (and fail where a C compiler is
    # but the optional build failed).
    if ! "$venv/bin/python" -I -c 'import shutil, sys, samzapy._speedups as s; shutil.copy(s.__file__, sys.argv[1])' samzapy/ 2>/dev/null; then
        echo "== Python $version: samzapy._speedups was not built (no C compiler or Python headers?): its paths run in Python"
    fi
done

# 2. The unit and contract suites: side by side on a machine of two CPUs or more (each suite
# runs in one process, on one CPU), each version's output printed whole once it is done.
suite() {
    ".venv-$1/bin/python" -m pytest -q -p no:cacheprovider tests/unit tests/contract
}
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
failed=()
if [[ ${#versions[@]} -gt 1 && "$(nproc)" -ge 2 ]]; then
    pids=()
    for version in "${versions[@]}"; do
        suite "$version" >"$logs/$version" 2>&1 &
        pids+=($!)
    done
    for i in "${!versions[@]}"; do
        wait "${pids[$i]}" || failed+=("${versions[$i]}")
        echo "== Python ${versions[$i]}: unit and contract suites"
        cat "$logs/${versions[$i]}"
    done
else
    for version in "${versions[@]}"; do
        echo "== Python $version: unit and contract suites"
        suite "$version" || failed+=("$version")
    done
fi
[[ ${#failed[@]} -eq 0 ]] || die "the unit and contract suites failed on Python ${failed[*]}"

# 3. The quick start, from each version's install.
for version in "${versions[@]}"; do
    scratch="$(mktemp -d)"
    SAMZAPY_OUTPUT_DIR="$scratch/output" SAMZAPY_STATE_DIR="$scratch/state" \
        ".venv-$version/bin/samzapy" run configs/quickstart.yaml --log-level warning
    test -s "$scratch/output/quickstart/page-view-counts/0.jsonl" ||
        die "the quick start on Python $version wrote no page-view counts"
    rm -rf "$scratch"
    echo "== Python $version: unit and contract suites and the quick start passed"
done
