#!/usr/bin/env bash
# Make .venv-integrations: audioicl with the integrations' libraries (inspect_ai, lmms-eval, datasets) beside the
# main .venv, whose versions they would change (inspect_ai's s3fs pins an older fsspec; lmms-eval brings torch,
# here the CPU build, and ~80 packages). The integration tests (tests/e2e/test_inspect_cli.py,
# test_lmms_eval_cli.py, test_export_cli.py) run from here; in .venv most of them skip. Prints that python's
# path. Idempotent: an environment that has them is kept (audioicl is reinstalled, it is quick).
# AUDIOICL_INTEGRATIONS_ENV names another folder for it.
set -euo pipefail
cd "$(dirname "$0")/.."
ENV="${AUDIOICL_INTEGRATIONS_ENV:-.venv-integrations}"  # about 2.7 GB; 7-8 minutes to make
INSPECT_VERSION=0.3.285
LMMS_EVAL_VERSION=0.7.3
DATASETS_VERSION=5.2.0
TORCH_CPU=2.13.0+cpu

if ! "$ENV/bin/python" - >/dev/null 2>&1 <<PY
import importlib.metadata as m
assert m.version("inspect_ai") == "$INSPECT_VERSION"
assert m.version("lmms_eval") == "$LMMS_EVAL_VERSION"
assert m.version("datasets") == "$DATASETS_VERSION"
m.version("openai")  # the inspect extra's provider client
PY
then
  rm -rf "$ENV"
  python3 -m venv "$ENV"
  "$ENV/bin/python" -m pip install -q --upgrade pip >&2
  # the CPU build of torch (lmms-eval imports it; no model of its own runs here)
  "$ENV/bin/python" -m pip install -q "torch==$TORCH_CPU" >&2
  "$ENV/bin/python" -m pip install -q -e ".[api,test]" "inspect_ai==$INSPECT_VERSION" openai \
    "lmms-eval==$LMMS_EVAL_VERSION" "datasets==$DATASETS_VERSION" "torch==$TORCH_CPU" "filelock<4" >&2
  # the torchvision that lmms-eval pulls in is built for the CUDA torch and fails to load beside the CPU
  # build (transformers then fails at import); audio tasks need none of it
  "$ENV/bin/python" -m pip uninstall -q -y torchvision >&2
fi
"$ENV/bin/python" -m pip install -q --no-deps -e . >&2
cd "$ENV" && echo "$PWD/bin/python"
