#!/usr/bin/env bash
# The wheels a GPU machine without network needs for the GPU benchmarks (benchmarks/gpu_pending.sh), for the
# machine's Python (default 3.12), downloaded here without torch, the CUDA libraries or anything the machine's
# torch install already has. A device call carries 64 MiB with the working tree (~4 MiB), so they come in three
# folders beside the tree (all ignored by git), each carried only by the parts that need it:
#
#   wheels/           ~37 MB  audioicl's core (soundfile, soxr, espeakng-loader), transformers 5.25 and what it
#                             brings (kernels included, as a user's install has it): every part
#   wheels-families/  ~23 MB  mistral-common (Voxtral's processor), torchaudio (Granite Speech, Fun-ASR-Nano),
#                             timm (Gemma 3n) and what they bring beyond wheels/: `rows`, `families`, `voxtral`
#   wheels-tools/      ~3 MB  py-spy: the parts that profile (`bf16`, `profile`)
#
#   bash benchmarks/gpu_wheels.sh [PREFIX] [PYTHON_VERSION]      # PREFIX default wheels
#
# then, for example, `carry: ["wheels", "wheels-families"]` for `gpu_pending.sh rows`; gpu_pending.sh installs
# every carried wheel without the resolver. (A tree to compare with goes to wheels-old/: see gpu_pending.sh.)
set -euo pipefail
prefix=${1:-wheels}
python_version=${2:-3.12}
download() {  # download DIR REQUIREMENT...: the binary wheels of the requirements and their dependencies
  local dir=$1; shift
  mkdir -p "$dir"
  pip download -q --python-version "$python_version" --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform any -d "$dir" "$@"
  # timm and torchaudio bring torch and its CUDA libraries, transformers numpy: the machine has its own
  (cd "$dir" && rm -f torch-* nvidia_* triton-* torchvision-* numpy-* sympy-* networkx-* mpmath-* setuptools-* \
    jinja2-* markupsafe-* fsspec-* filelock-* typing_extensions-* pillow-* hf_xet-*)
}
download "$prefix" transformers==5.25.0 tokenizers==0.23.3 soundfile soxr espeakng-loader
download "$prefix-families" 'mistral-common[audio]==1.13.1' torchaudio==2.11.0 timm
download "$prefix-tools" py-spy
for wheel in "$prefix"/*.whl; do  # each wheel in one folder only
  rm -f "$prefix-families/$(basename "$wheel")" "$prefix-tools/$(basename "$wheel")"
done
du -sh "$prefix" "$prefix-families" "$prefix-tools"
