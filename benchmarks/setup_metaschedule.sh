#!/usr/bin/env bash
# Create .venv-tvm/ (a venv separate from .venv) with Apache TVM's MetaSchedule, for
# benchmarks/tune_vs_metaschedule.py only. Idempotent: re-running it changes nothing once set up.
#
#     bash benchmarks/setup_metaschedule.sh
#
# TVM is never installed into .venv. Its MetaSchedule XGBoost cost model needs xgboost (xgboost-cpu: the
# same module without the CUDA NCCL wheel);
# the RPC-free local runner/builder need psutil, cloudpickle and tornado.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV=.venv-tvm
TVM_PKGS=(apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1)
DEPS=(numpy ml_dtypes psutil cloudpickle tornado xgboost-cpu scipy typing_extensions)

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
if "$VENV/bin/python" - <<'PY' 2>/dev/null; then
import importlib.metadata as m, sys
want = {"apache-tvm": "0.27.0.post1", "apache-tvm-ffi": "0.1.14.post1"}
ok = all(m.version(k) == v for k, v in want.items())
for mod in ("xgboost", "psutil", "cloudpickle", "tornado", "numpy"):
    __import__(mod)
sys.exit(0 if ok else 1)
PY
    echo "$VENV already set up: $("$VENV/bin/python" -c 'import tvm; print("tvm", tvm.__version__)')"
    exit 0
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install "${TVM_PKGS[@]}" "${DEPS[@]}"
"$VENV/bin/python" -c 'import tvm; print("tvm", tvm.__version__, "installed in '"$VENV"'")'
