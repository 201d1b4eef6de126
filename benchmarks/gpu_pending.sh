#!/usr/bin/env bash
# The GPU measurements issues 22 and 23 still need, one device call per part (each well under the device's
# 10 minutes a command), on a machine without network. Prepare here, once:
#
#   bash benchmarks/gpu_wheels.sh      # wheels/, wheels-families/, wheels-tools/ (ignored by git): see there
#   mkdir -p wheels-old && git archive COMMIT src benchmarks | tar -x -C wheels-old   # the tree to compare with
#
# then run on the machine, with `wheels` carried beside the working tree, and `wheels-families` for the parts
# that load Voxtral, Granite Speech, Fun-ASR-Nano or Gemma 3n (rows, families, voxtral), `wheels-tools` for
# those that profile (bf16, profile), `wheels-old` for those that compare with an older tree (64 MiB a call):
#
#   bash benchmarks/gpu_pending.sh families      # the hf families without a GPU row yet (issue 22)
#   bash benchmarks/gpu_pending.sh omni          # the Omni thinkers before (57e0aa4) and now (issue 22)
#   bash benchmarks/gpu_pending.sh pack          # -o pack=on against off, three Qwen families (issue 23)
#   bash benchmarks/gpu_pending.sh attention     # the reuse path's attention kernels, each against its baseline
#   bash benchmarks/gpu_pending.sh before        # the tree in wheels-old over the same runs (the baseline)
#   bash benchmarks/gpu_pending.sh omni20        # the Omni thinkers over 20 episodes a task (issue 23's mix)
#   bash benchmarks/gpu_pending.sh ramp          # the Omni thinkers' 20-episode mix: windows 1, 2, 4 batches vs 4
#   bash benchmarks/gpu_pending.sh row20 FAMILIES # each family's row: its mix by default, 5 episodes by plain generate
#   bash benchmarks/gpu_pending.sh rows FAMILIES  # row20 for many families at once, one a GPU (nvidia-h100-x8)
#   bash benchmarks/gpu_pending.sh same20 FAMILY # its 20-episode mix, reuse=off and prefix: the answers' identical share
#   bash benchmarks/gpu_pending.sh encode        # the reuse path's encoder at 32, 64 and 128 clips a call
#   bash benchmarks/gpu_pending.sh voxtral       # Voxtral's row, now on the fast path (45 prompts)
#   bash benchmarks/gpu_pending.sh whole FAMILY [SPEED]  # the whole benchmark (13,500 prompts), SPEED fused
#   bash benchmarks/gpu_pending.sh user FAMILY    # the whole benchmark as a user runs it: checkpoint saved, audioicl run
#   bash benchmarks/gpu_pending.sh bf16           # Qwen2-Audio's whole benchmark in bf16, audioicl run (checkpoint kept)
#   bash benchmarks/gpu_pending.sh fp8            # then -o precision=fp8 on it: identical share and compare against bf16
#   bash benchmarks/gpu_pending.sh levers         # kernels alone, then the 20-episode mix: wheels-old's tree vs this
#   bash benchmarks/gpu_pending.sh profile [FAMILY] # the 20-episode mix's phases, py-spy per thread, GPU kernels
#   bash benchmarks/gpu_pending.sh sdpa          # the prefill of 12 episodes a task: each choice of sdpa kernels
#   bash benchmarks/gpu_pending.sh kernels [FAMILY] [fp8] # the GPU kernels of 3 episodes a task by kind (in-process)
#   bash benchmarks/gpu_pending.sh fused         # the Triton kernels alone, then the 20-episode mix without and with
#   bash benchmarks/gpu_pending.sh contend       # encoder and one batch beside the preparing thread (GIL)
#   bash benchmarks/gpu_pending.sh together      # 20-episode mix, -o decode_batches=1, 2 (and 4), three Qwen families
#   bash benchmarks/gpu_pending.sh ahead FAMILY  # its 20-episode mix, -o encode_ahead=on, off, on (the first a throwaway)
#   bash benchmarks/gpu_pending.sh codec         # Apertus 1.5's WavTokenizer a clip a call: as loaded, then prepared
#
# Each part writes its JSON rows under $OUT (the device tool brings them back) and prints its tables.
set -euo pipefail
cd "$(dirname "$0")/.."
part=${1:?which part: see the list above}
out=${OUT:-/tmp/gpu-pending}
mkdir -p "$out"
# the interpreter that holds the machine's torch (python3 there; a bare `pip` may belong to another)
py=${PYTHON:-python3}

# every carried wheel as it is, without the resolver: the image's own versions of what they need (numpy, torch,
# torchaudio, pillow ...) stay, and pip's resolver refused the set against them
"$py" -m pip install -q --no-deps --no-index wheels/*.whl $(ls wheels-families/*.whl wheels-tools/*.whl 2>/dev/null)
export PYTHONPATH="$PWD/src"  # audioicl from the tree: installing it would need its build backend (hatchling)

build() {  # build EPISODES: the benchmark at that size, once per machine
  [ -f "/tmp/B$1/manifest.json" ] || "$py" -m audioicl build --out "/tmp/B$1" --episodes "$1" --quiet --workers 12
}

# the FP8 condition's input quantization kernel against the eager one, bit for bit (the interpreter cannot say)
fp8_kernel_check='
import torch
from audioicl.backends.hf.fp8 import rowwise
from audioicl.backends.hf.reuse.kernels import rowwise_e4m3
x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) * torch.logspace(-3, 3, 4096, device="cuda")[:, None]
(a, s), (b, t) = rowwise_e4m3(x), rowwise(x)
print("rowwise_e4m3 bit-equal to the eager quantization:", torch.equal(a.float(), b.float()) and torch.equal(s, t))
'

case "$part" in
  families)
    build 2
    "$py" benchmarks/gpu_families.py --data /tmp/B2 --limit 1 --plain 5 \
      --families voxtral,granite-speech,fun_asr_nano,gemma4_unified,nemotron_h_omni,gemma4,apertus1p5 \
      --json "$out/families.json"
    ;;
  omni)
    build 5
    PYTHONPATH=wheels-old/src "$py" wheels-old/benchmarks/gpu_throughput.py --data /tmp/B5 \
      --families qwen2.5-omni,qwen3-omni --reuse prefix --batch-size 128 --logit-episodes 0 \
      --json "$out/omni_before.json"
    "$py" benchmarks/gpu_throughput.py --data /tmp/B5 --families qwen2.5-omni,qwen3-omni --reuse prefix \
      --batch-size 128 --logit-episodes 0 --speeds off,graphs --json "$out/omni_now.json"
    ;;
  pack)
    build 5
    for packing in "" --pack; do
      "$py" benchmarks/gpu_throughput.py --data /tmp/B5 --families qwen2-audio,qwen2.5-omni,qwen3-omni \
        --reuse prefix --batch-size 128 --logit-episodes 0 --speeds graphs $packing \
        --json "$out/pack${packing:+_on}.json"
    done
    ;;
  attention)
    build 10
    "$py" benchmarks/gpu_throughput.py --data /tmp/B10 --families qwen2.5-omni,qwen3-omni,qwen2-audio \
      --reuse prefix --limit 10 --batch-size 128 --speeds graphs --logit-episodes 0 --repeats 2 \
      --step-ms --encode-ms 10 --profile 2 --json "$out/attention.json"
    ;;
  before)
    build 10
    PYTHONPATH=wheels-old/src "$py" wheels-old/benchmarks/gpu_throughput.py --data /tmp/B10 \
      --families qwen2.5-omni,qwen3-omni,qwen2-audio --reuse prefix --limit 10 --batch-size 128 \
      --speeds graphs --logit-episodes 0 --repeats 2 --json "$out/before.json"
    ;;
  omni20)
    build 20
    for family in qwen2.5-omni qwen3-omni; do  # one process each: the first timed model of a process is slower
      "$py" benchmarks/gpu_throughput.py --data /tmp/B20 --families $family --reuse prefix --batch-size 128 \
        --speeds graphs --logit-episodes 0 --repeats 1 --json "$out/$family.json"
    done
    ;;
  ramp)
    build 20
    for family in qwen2.5-omni qwen3-omni; do
      for window in 512 ""; do  # 512: every call 4 batches (before); "": the runner's ramp
        "$py" benchmarks/gpu_throughput.py --data /tmp/B20 --families $family --reuse prefix --batch-size 128 \
          --speeds graphs --logit-episodes 0 --repeats 1 ${window:+--window $window} \
          --json "$out/ramp_${family}_${window:-ramp}.json"
      done
    done
    ;;
  row20)  # issue 41: each family's row of docs/performance.md through audioicl run: its 20-episode mix by
    # default, plain `generate` (-o reuse=off) over its first 5 episodes a task (the same tasks and k; 4x fewer
    # prompts, so that every family fits one session's device time: plain generate takes ~3 minutes a 7B family
    # over the whole mix), prompts/s of each, peak memory, the identical share on the prompts both answered;
    # the families as a comma list (a 7B family's save and two runs: about 2 minutes)
    build 20
    "$py" benchmarks/whole_run.py --data /tmp/B20 --families "${2:?row20 needs families}" \
      --run "default=" --run "plain=-o reuse=off --name plain --limit 5" --json "$out/row20_${2//,/_}.json"
    ;;
  rows)  # issue 41: `row20` for many families at once on a machine of several GPUs (nvidia-h100-x8: every family in
    # one call): lane g runs families g, g + GPUs, ... one after another on GPU g, each in its own work folder; a
    # family without the fast path (its default is plain generate) runs only the plain run. Each lane's table
    # and JSON under $out; Qwen3-Omni's checkpoint needs 61 GB of disk (an x8 machine has 235 GiB)
    build 20
    IFS=, read -ra families <<< "${2:?rows needs families}"
    gpus=$(nvidia-smi -L | wc -l)
    fast=$("$py" -c "from audioicl.backends.hf.reuse.parts import PARTS; print(' '.join(PARTS))")
    lane() {  # lane GPU FAMILY...
      local gpu=$1; shift
      for family in "$@"; do
        local runs=(--run "plain=-o reuse=off --name plain --limit 5")
        [[ " $fast " == *" $family "* ]] && runs=(--run "default=" "${runs[@]}")
        CUDA_VISIBLE_DEVICES=$gpu "$py" benchmarks/whole_run.py --data /tmp/B20 --families "$family" \
          --work "/tmp/whole-run-$gpu" "${runs[@]}" --json "$out/row20_$family.json" \
          > "$out/row20_$family.txt" 2>&1 || echo "$family: exit $? (row20_$family.txt)"
      done
    }
    for ((g = 0; g < gpus && g < ${#families[@]}; g++)); do
      mine=()
      for ((at = g; at < ${#families[@]}; at += gpus)); do mine+=("${families[at]}"); done
      lane "$g" "${mine[@]}" &
    done
    wait
    grep -hE "^\| [a-z0-9]|identical to|runs [0-9.]+x" "$out"/row20_*.txt | grep -v "^| B vs A" || true
    ;;
  same20)
    family=${2:?same20 needs a family}
    build 20
    "$py" benchmarks/gpu_throughput.py --data /tmp/B20 --families "$family" --reuse off,prefix --batch-size 128 \
      --speeds graphs --logit-episodes 0 --repeats 1 --json "$out/same20_$family.json"
    ;;
  encode)
    build 10
    "$py" benchmarks/gpu_throughput.py --data /tmp/B10 --families qwen2.5-omni,qwen3-omni,qwen2-audio \
      --reuse prefix --limit 10 --batch-size 128 --speeds graphs --logit-episodes 0 --repeats 2 \
      --encode-ms 10 --encode-chunks 64,128 --json "$out/encode.json"
    ;;
  voxtral)
    build 2
    "$py" benchmarks/gpu_families.py --data /tmp/B2 --limit 1 --plain 5 --families voxtral \
      --json "$out/voxtral.json"
    ;;
  whole)
    family=${2:?whole needs a family: qwen2-audio, qwen2.5-omni or qwen3-omni}
    speed=${3:-fused}  # gpu_throughput's --speeds: graphs (the run before the Triton kernels), fused
    build 300
    "$py" benchmarks/gpu_throughput.py --data /tmp/B300 --families "$family" --reuse prefix --batch-size 128 \
      --speeds "$speed" --logit-episodes 0 --repeats 1 --json "$out/whole_${family}_$speed.json"
    ;;
  bf16)  # issue 41: Qwen2-Audio's whole benchmark in bf16 as a user runs it, the checkpoint kept for `fp8`;
    # first the kernels alone (the rotary's bit-equality), and py-spy over the run's threads; before it, a run
    # of the first 3 episodes a task (135 prompts: the first window and 7 more) under its own name, whose
    # profile is where the first window's wait goes (and which warms the machine's file cache for the checkpoint)
    "$py" benchmarks/fused_kernels.py | tail -2
    build 300
    "$py" benchmarks/whole_run.py --data /tmp/B300 --families qwen2-audio --keep \
      --run "first=--limit 3 --name first" --run "bf16=" --spy "$out/spy" --json "$out/bf16.json"
    "$py" benchmarks/spy_summary.py "$out/spy/qwen2-audio_first.txt" --rate 50 --top 40 > "$out/first_spy.txt" || true
    ;;
  fp8)  # then -o precision=fp8 on the same checkpoint (bf16 resumed: nothing to do), identical share, compare
    build 300
    "$py" -c "$fp8_kernel_check"
    "$py" benchmarks/whole_run.py --data /tmp/B300 --families qwen2-audio --keep --run "bf16=" \
      --run "fp8=-o precision=fp8" --results "$out/results" --json "$out/fp8.json"
    ;;
  profile)  # issue 41: where the 20-episode mix's time goes (run record phases, py-spy of every thread), with
    # and without encoding ahead, then the prefill's GPU kernels (in-process; the table to profile_kernels.txt)
    build 20
    "$py" benchmarks/whole_run.py --data /tmp/B20 --families "${2:-qwen2-audio}" --keep --spy "$out/spy" \
      --run "warm=--name warm" --run "sdpa=" \
      --run "noahead=-o encode_ahead=off --name noahead" --json "$out/profile.json"
    "$py" benchmarks/gpu_throughput.py --data /tmp/B20 --families "${2:-qwen2-audio}" --reuse prefix \
      --batch-size 128 --speeds graphs --logit-episodes 0 --repeats 1 --limit 3 --profile 3 \
      > "$out/profile_kernels.txt" 2>&1 || tail -5 "$out/profile_kernels.txt"
    ;;
  sdpa)  # issue 41: the prefill's attention is a third of its matmuls' time: which sdpa kernel for its causal head
    # and which for the rest under the mask (in-process, the fused kernels in force)
    build 20
    # batches of 64: at 128 the whole set's first-position logits beside a batch's prefill ran out of memory
    cd benchmarks && PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$py" prefill_attention.py --data /tmp/B20 \
      --episodes 12 --batch-size 64 --repeats 2 | tee "$out/sdpa.md"
    ;;
  kernels)  # issue 41: where the GPU's time goes, by kind of kernel, over 3 episodes a task (in-process);
    # `kernels qwen2-audio fp8`: the same under -o precision=fp8's linears (its prefill gained 14 %, not ~1.85x)
    build 20
    "$py" benchmarks/gpu_throughput.py --data /tmp/B20 --families "${2:-qwen2-audio}" --reuse prefix \
      --batch-size 128 --speeds fused --logit-episodes 0 --repeats 1 --limit 3 --profile 3 \
      --precision "${3:-native}" > "$out/kernels.txt" 2>&1 || true
    grep -A30 "^| kernels" "$out/kernels.txt"
    ;;
  levers)  # issue 41: the kernels alone, then the 20-episode mix through audioicl run, the tree in wheels-old
    # (the code before) and this one taking turns on one kept checkpoint (the first run a throwaway), and
    # the share of this tree's answers identical to the old one's
    "$py" benchmarks/fused_kernels.py
    build 20
    turn() {  # turn NAME [PYTHONPATH]: one run named NAME through the tree on that path
      PYTHONPATH="${2:-$PWD/src}" "$py" benchmarks/whole_run.py --data /tmp/B20 --families qwen2-audio --keep \
        --run "$1=--name $1" --json "$out/$1.json" | tail -1
    }
    turn warm
    turn old1 "$PWD/wheels-old/src"
    turn new1
    turn old2 "$PWD/wheels-old/src"
    turn new2
    "$py" -c "
import sys; sys.path.insert(0, 'benchmarks'); from pathlib import Path; from whole_run import identical_share
out = Path('/tmp/whole-run/out-qwen2-audio')
for a, b in (('old1', 'new1'), ('old1', 'old2'), ('new1', 'new2')): print(b, 'identical to', a, identical_share(out, a, b)['all'])"
    ;;
  user)
    build 300
    "$py" benchmarks/whole_run.py --data /tmp/B300 --families "${2:?user needs a family}" --json "$out/user_$2.json"
    ;;
  fused)
    "$py" benchmarks/fused_kernels.py
    build 20
    # one process a family; its first timed run is slower (a throwaway graphs run), then fused, graphs, fused
    for family in qwen2.5-omni qwen2-audio; do
      "$py" benchmarks/gpu_throughput.py --data /tmp/B20 --families $family --reuse prefix --batch-size 128 \
        --speeds graphs,fused,graphs,fused --logit-episodes 0 --repeats 1 --json "$out/fused_$family.json"
    done
    ;;
  contend)
    build 5
    "$py" benchmarks/thread_contention.py --data /tmp/B5 --families qwen2.5-omni,qwen3-omni --limit 5 --batch-size 64 \
      --json "$out/contend.json"
    ;;
  together)
    build 20
    # one process each (the first timed model is slower); Qwen2-Audio's KV (32 full heads) leaves room for 2
    # the first timed run of a process runs slower (its encoder most: new shapes); each list starts with a
    # throwaway 1 and the rows compared are the later ones
    for run in qwen3-omni:1,1,2,4 qwen2.5-omni:1,1,2,4 qwen2-audio:1,1,2; do
      "$py" benchmarks/gpu_throughput.py --data /tmp/B20 --families "${run%%:*}" --reuse prefix --batch-size 128 \
        --speeds graphs --logit-episodes 0 --repeats 1 --decode-batches "${run#*:}" \
        --json "$out/together_${run%%:*}.json"
    done
    ;;
  ahead)
    family=${2:?ahead needs a family}
    build 20
    "$py" benchmarks/gpu_throughput.py --data /tmp/B20 --families "$family" --reuse prefix --batch-size 128 \
      --speeds graphs --logit-episodes 0 --repeats 1 --encode-ahead on,off,on --json "$out/ahead_$family.json"
    ;;
  codec)  # issue 41: Apertus 1.5's codec alone (in-process), then its row through audioicl run (wheels-families
    # not needed): the preparing thread's encode_ahead was 34.9 s of its 80.4 s run before
    "$py" benchmarks/codec_speed.py --clips 200 --repeats 3 | tee "$out/codec.md"
    build 20
    "$py" benchmarks/whole_run.py --data /tmp/B20 --families apertus1p5 --run "default=" --json "$out/codec_row.json"
    ;;
  *)
    echo "unknown part $part: families, omni, pack, attention, before, omni20, ramp, same20, encode, voxtral, whole, user, fused, contend, together or ahead" >&2
    exit 2
    ;;
esac
