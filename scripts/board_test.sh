#!/usr/bin/env bash
# The board-side tests under the board's Python: PYNQ v3.0/v3.1 images (the last for PYNQ-Z1/Z2)
# run Python 3.10 with numpy 1.x and no llvmlite/onnx. Makes .venv-board with Python 3.10 (pyenv's,
# or python3.10 on PATH; fails loudly if there is none), numpy 1.26.4, pytest and pyvta without
# extras; builds the fixtures with the host's .venv; runs tests/board there. Then the same tests
# on the boards' ARM CPUs, emulated: Debian's python3 and numpy of an armhf (Cortex-A9, PYNQ-Z1/Z2)
# and an arm64 (Cortex-A53, Ultra96/ZCU104) userland under qemu-user (scripts/arm_userland.sh,
# cached). PYVTA_BOARD_ARCHES picks them (default "armhf arm64"; "" for the x86 run only).
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
arches=${PYVTA_BOARD_ARCHES-armhf arm64}
# shellcheck disable=SC2086
.venv/bin/python -P -m pyvta.testing.board "$fixtures" $arches
# Python 3.10 has no -P: run from the fixtures folder, so the checkout is not on sys.path.
root=$(pwd)
(cd "$fixtures" && PYVTA_BOARD_FIXTURES="$fixtures" "$root/.venv-board/bin/python" -m pytest -q \
   -p no:cacheprovider --rootdir "$root" "$root/tests/board")

# The ARM userlands: pyvta's wheel (no extras) unpacked beside the fixtures, on PYTHONPATH.
if [ -n "$arches" ]; then
  site=$(.venv/bin/python -P -m pyvta.testing.arm --site "$fixtures/pyvta")
  for arch in $arches; do
    py=$(bash scripts/arm_userland.sh "$arch")
    echo "board-test: tests/board on $arch (emulated)"
    (cd "$fixtures" && PYTHONPATH="$site" PYVTA_BOARD_ARCH="$arch" PYVTA_BOARD_FIXTURES="$fixtures" \
       "$py" -m pytest -q -p no:cacheprovider --rootdir "$root" "$root/tests/board")
  done
fi
