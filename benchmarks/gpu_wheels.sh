#!/usr/bin/env bash
# The wheels a GPU machine without network needs for the GPU benchmarks (gpu_families.py, gpu_throughput.py):
# audioicl's core (soundfile, soxr, espeakng-loader), transformers 5.25 (the families beyond the Qwen ones),
# torchaudio (Granite Speech, Fun-ASR-Nano), mistral-common (Voxtral) and timm (Gemma 3n), for the machine's
# Python (default 3.12), downloaded here into DIR (default wheels/, which .git/info/exclude should list) without
# torch, the CUDA libraries or anything the machine's torch install already has: about 60 MB.
#
#   bash benchmarks/gpu_wheels.sh [DIR] [PYTHON_VERSION]
#
# Then, on the machine (the folder carried beside the working tree):
#   pip install --no-index --find-links DIR transformers==5.25.0 soundfile soxr espeakng-loader \
#       'mistral-common[audio]' torchaudio==2.11.0
#   pip install --no-deps --no-index DIR/timm-*.whl && pip install --no-deps -e .
set -euo pipefail
dir=${1:-wheels}
python_version=${2:-3.12}
mkdir -p "$dir"
pip download -q --python-version "$python_version" --only-binary=:all: \
  --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  --platform any -d "$dir" transformers==5.25.0 tokenizers==0.23.3 soundfile soxr espeakng-loader \
  'mistral-common[audio]==1.13.1' torchaudio==2.11.0 timm
# timm and torchaudio bring torch and its CUDA libraries: the machine has its own
(cd "$dir" && rm -f torch-* nvidia_* triton-* torchvision-* numpy-* sympy-* networkx-* mpmath-* setuptools-* \
  jinja2-* markupsafe-* fsspec-* filelock-* typing_extensions-* pillow-* hf_xet-*)
du -sh "$dir"
