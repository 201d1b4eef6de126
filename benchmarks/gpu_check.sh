#!/usr/bin/env bash
# One command on the GPU machine that checks the fast path against its standing row (issue 54): the benchmark
# built (300 episodes a task, 13,500 prompts), the full-size random-weight Qwen2-Audio checkpoint made and saved,
# the whole bf16 run through `audioicl run --model hf:CKPT` as a user runs it, scored, then
# benchmarks/gpu_check.py's table beside benchmarks/gpu_standing.json and its verdict (REGRESSION where the
# record wall is 5 % or more above the standing row or the decodes grew). Under 10 minutes on an H100.
#
#   bash benchmarks/gpu_wheels.sh                        # here, once: wheels/ (carried: ["wheels"])
#   bash benchmarks/gpu_check.sh                         # there, before a change and after it
#
# A second call on the same warm machine reruns the run under another name beside the first and reports the
# share of its answers identical to the first's. JSON and the table go to $OUT. AUDIOICL_SRC: another tree's
# src/ (the code before a change, carried beside this one). EMULATE_GIB=78.6 on a larger card (an H200 when no
# H100 comes): the run's memory capped at an H100 80GB's (benchmarks/emulate_80gb), so its decodes and halvings
# are the H100's; its seconds are not, and the verdict on the wall does not apply.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
py=${PYTHON:-python3}
"$py" -m pip install -q --no-deps --no-index wheels/*.whl
export PYTHONPATH="${AUDIOICL_SRC:-$PWD/src}"
[ -f /tmp/B300/manifest.json ] || "$py" -m audioicl build --out /tmp/B300 --episodes 300 --quiet --workers 12
if [ -n "${EMULATE_GIB:-}" ]; then
  export AUDIOICL_EMULATE_GIB=$EMULATE_GIB PYTHONPATH="$PYTHONPATH:$PWD/benchmarks/emulate_80gb"
fi
runs=(--run "bf16=")
if ls /tmp/whole-run/out-qwen2-audio/*_run.json >/dev/null 2>&1; then
  runs=(--run "earlier=" --run "again=--name again-$(date +%s)")  # the earlier run resumes: nothing to do
fi
"$py" benchmarks/whole_run.py --data /tmp/B300 --families qwen2-audio --keep "${runs[@]}" --json "$out/runs.json"
"$py" -c '
import json, sys
rows = json.load(open(sys.argv[1]))
last = rows[-1]
if len(rows) > 1:
    last["identical_to_earlier"] = last.get("identical_to_first", {}).get("all", "-")
json.dump([last], open(sys.argv[2], "w"), indent=2)
' "$out/runs.json" "$out/check.json"
"$py" -m audioicl score --in /tmp/whole-run/out-qwen2-audio --out "$out/scores" > "$out/score.txt" || true
tail -3 "$out/score.txt"
"$py" benchmarks/gpu_check.py "$out/check.json" | tee "$out/check.txt"
