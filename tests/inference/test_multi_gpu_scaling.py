"""``benchmarks/multi_gpu_scaling.py`` on CPU: two shard processes, merged, equal the one-process run.

The script is what measures data-parallel scaling on a machine with several GPUs (issue 13); here it runs a
tiny random-weight checkpoint in fp32 on the CPU, where the answers must not depend on how the episodes
were split.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "multi_gpu_scaling.py"


def test_two_shard_processes_merge_to_the_one_process_run(tiny_dataset, tiny_checkpoints, tmp_path):
    rows_file = tmp_path / "rows.json"
    command = [
        sys.executable, SCRIPT, "--data", tiny_dataset, "--model", f"hf:{tiny_checkpoints['qwen2-audio']}",
        "--device", "cpu", "--dtype", "fp32", "--gpus", "1,2", "--k", "1,2", "--batch-size", "4",
        "--out", tmp_path / "scaling", "--json", rows_file,
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    one, two = json.loads(rows_file.read_text())
    assert (one["gpus"], two["gpus"]) == (1, 2)
    episodes = len((tiny_dataset / "meta" / "meta_k1.jsonl").read_text().splitlines())
    assert one["prompts"] == two["prompts"] == 2 * episodes
    assert two["equal_to_one_gpu"] == two["lines_of_one_gpu"] == 2 * episodes
    assert one["efficiency"] == 1.0 and two["efficiency"] > 0
    # each shard ran in its own folder and only its own episodes
    shards = [tmp_path / "scaling" / "n2" / f"shard-{i}-of-2" for i in (1, 2)]
    ids = [{json.loads(line)["id"] for line in next(s.glob("*_results_k1.jsonl")).open()} for s in shards]
    assert ids[0] and ids[1] and not ids[0] & ids[1]
    assert "| 2 |" in proc.stdout and "merged = 1 GPU" in proc.stdout
