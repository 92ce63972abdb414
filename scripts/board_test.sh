#!/usr/bin/env bash
# The board-side tests under the board's Python: PYNQ v3.0/v3.1 images (the last for PYNQ-Z1/Z2)
# run Python 3.10 with numpy 1.x and no llvmlite/onnx. Makes .venv-board with Python 3.10 (pyenv's,
# or python3.10 on PATH; fails loudly if there is none), numpy 1.26.4, pytest and pyvta without
# extras; builds the fixtures with the host's .venv; runs tests/board there.
set -euo pipefail
cd "$(dirname "$0")/.."

py310=""
for cand in "${PYTHON310:-}" "$(command -v python3.10 || true)" \
            "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/3.10*/bin/python3.10; do
  if [ -n "$cand" ] && [ -x "$cand" ] && "$cand" -c 'import sys; assert sys.version_info[:2] == (3, 10)' 2>/dev/null; then
    py310=$cand
    break
  fi
done
if [ -z "$py310" ]; then
  echo "board-test: no Python 3.10 found (pyenv versions, python3.10, or PYTHON310=...)." >&2
  echo "board-test: the board-side runtime must be tested under the board's Python; not skipping." >&2
  exit 1
fi
if [ ! -x .venv-board/bin/python ] || [ pyproject.toml -nt .venv-board/.installed ] \
   || [ setup.py -nt .venv-board/.installed ]; then
  echo "board-test: creating .venv-board with $("$py310" --version)"
  rm -rf .venv-board
  "$py310" -m venv .venv-board
  .venv-board/bin/python -m pip install -q --disable-pip-version-check numpy==1.26.4 pytest==8.4.2
  .venv-board/bin/python -m pip install -q --disable-pip-version-check -e .
  touch .venv-board/.installed
fi
fixtures=$(mktemp -d)
trap 'rm -rf "$fixtures"' EXIT
.venv/bin/python -P -m pyvta.testing.board "$fixtures"
# Python 3.10 has no -P: run from the fixtures folder, so the checkout is not on sys.path.
root=$(pwd)
(cd "$fixtures" && PYVTA_BOARD_FIXTURES="$fixtures" "$root/.venv-board/bin/python" -m pytest -q \
   -p no:cacheprovider --rootdir "$root" "$root/tests/board")
